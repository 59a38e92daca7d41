package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/gobin"
)

// TestMain lets the test binary stand in for torchmem-bench's children
// (run re-executes itself to write the inputs and to decompress alone).
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && strings.HasPrefix(os.Args[1], "-child-") {
		if err := child(os.Args[1], os.Args[2:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The quick mode end to end on the smallest inputs (one copy of
// resnet_train_clean's 8 MB trace rather than big_transformer's 76 MB: the
// same code path for a fifth of the test's CPU; two of frag_small_allocs'
// history): every row and ratio
// the README quotes is printed, from measurements that are real (torchmem's
// peak RSS well above the measuring process's floor and above the input's
// share it must hold; wall and CPU non-zero).
func TestQuickBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds torchmem and runs it a dozen times")
	}
	dir := t.TempDir()
	bin := gobin.Torchmem(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	_, pyErr := exec.LookPath("python3")
	var out bytes.Buffer
	c := config{root: root, dir: dir, torchmem: bin, python: "python3", traceSource: "testdata/traces/resnet_train_clean/trace.json.gz",
		traceCopies: 1, snapshotCopies: 2, rounds: 1, pickleRounds: 1, out: &out, log: io.Discard}
	if err := run(c); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	want := []string{"| ops | `.json` | 1 |", "| analyze | `.json` | 1 |", "| report | `.json.gz` | 1 |", "| zcat | `.json.gz` |",
		"| decompress only | `.json.gz` |", "| ops | `.members.json.gz` | 1 |", "ops .members.json.gz / ops .json, wall: ", "analyze / ops, wall, .json: ", "ops .json.gz speed as a share of zcat's", "bound on that share on ", "load average (1, 5, 15 min) round 1: "}
	if pyErr == nil {
		want = append(want, "| snapshot | `.pickle` | 1 |", "| analyze | `.pickle.gz` | 1 |", "| pickle.load | `.pickle` | 1 |",
			"pickle.load / snapshot, wall, .pickle: ")
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("no %q in the output:\n%s", w, text)
		}
	}
	// Each torchmem row: wall and user CPU measured, peak RSS above the
	// floor (the measuring process's own) and at least a few MB.
	floor := regexp.MustCompile(`peak RSS floor: ([0-9.]+) MiB`).FindStringSubmatch(text)
	if floor == nil {
		t.Fatalf("no peak RSS floor:\n%s", text)
	}
	floorMiB, _ := strconv.ParseFloat(floor[1], 64)
	row := regexp.MustCompile("(?m)^\\| (ops|analyze|report|snapshot) \\| `[.a-z]+` \\| 1 \\| ([0-9.]+) s \\| [0-9]+ \\| ([0-9.]+) s \\| [0-9.]+ s \\| [0-9]+ \\| ([0-9]+) MiB \\|")
	rows := row.FindAllStringSubmatch(text, -1)
	if len(rows) < 6 {
		t.Fatalf("%d torchmem rows, want 6 or more:\n%s", len(rows), text)
	}
	for _, r := range rows {
		wall, _ := strconv.ParseFloat(r[2], 64)
		user, _ := strconv.ParseFloat(r[3], 64)
		rss, _ := strconv.ParseFloat(r[4], 64)
		if wall <= 0 || user <= 0 || rss <= floorMiB || rss < 15 {
			t.Errorf("%s: wall %v s, user %v s, peak RSS %v MiB (floor %v MiB): not a measurement", r[0], wall, user, rss, floorMiB)
		}
	}
}

// TestCommitOfGivenBinary: a binary given with -torchmem is named by its
// own VCS stamp, never by the clone's commit (figures measured with a
// binary of another commit were printed under the clone's). Test
// binaries carry no stamp.
func TestCommitOfGivenBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got := commit(root, self, false); !strings.Contains(got, "carries no VCS stamp") {
		t.Errorf("commit of an unstamped binary = %q, want it said unknown", got)
	}
	if got := commit(root, filepath.Join(t.TempDir(), "missing"), false); got != "commit unknown" {
		t.Errorf("commit of a missing binary = %q, want %q", got, "commit unknown")
	}
}
