package digest

import (
	"fmt"
	"strings"
	"testing"
)

// A digest names the kind of file it was made from; one whose kind
// torchmem does not know is refused when read, not carried into the rules.
func TestReadRefusesAnUnknownKind(t *testing.T) {
	doc := func(kind string) string {
		return fmt.Sprintf(`{"format": %q, "schema_version": %d, "kind": %q, "source": "x", "rank": -1, "oom_facts": {}}`, Format, SchemaVersion, kind)
	}
	if _, err := Read(strings.NewReader(doc("pickle"))); err == nil || !strings.Contains(err.Error(), "pickle") {
		t.Errorf("unknown kind: %v", err)
	}
	s, err := Read(strings.NewReader(doc("steps")))
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Input()
	if err != nil || !in.IsDigest() || in.Kind != "steps" {
		t.Errorf("a steps log's summary: %v %+v", err, in)
	}
}
