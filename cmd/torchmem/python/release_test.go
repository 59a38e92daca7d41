package python

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The release workflow (examples/ci/release-pypi.yml) as far as it can be
// checked offline: it parses; a version tag triggers it; its build step is
// build.sh with no targets (all four, the ones TestWheels builds and
// checks) into the folder its artifact uploads; the publishing job uses
// PyPI trusted publishing (id-token: write, no token or password), and
// nothing else gets write permissions; every action is pinned.
func TestReleaseWorkflow(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "ci", "release-pypi.yml"))
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		Name string            `yaml:"name"`
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]any    `yaml:"with"`
		Env  map[string]string `yaml:"env"`
	}
	type job struct {
		RunsOn      string            `yaml:"runs-on"`
		Environment any               `yaml:"environment"`
		Needs       any               `yaml:"needs"`
		Permissions map[string]string `yaml:"permissions"`
		Steps       []step            `yaml:"steps"`
	}
	var wf struct {
		Name string `yaml:"name"`
		On   struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]job    `yaml:"jobs"`
	}
	if err := yaml.UnmarshalWithOptions(raw, &wf, yaml.Strict()); err != nil {
		t.Fatalf("release-pypi.yml: %v", err)
	}
	// Strict: a misspelt key (runs_on, permisions) fails here, not on the first tag.
	if !slices.Equal(wf.On.Push.Tags, []string{"v*"}) {
		t.Errorf("triggered by tags %v, want [v*]", wf.On.Push.Tags)
	}
	if len(wf.Permissions) != 1 || wf.Permissions["contents"] != "read" {
		t.Errorf("workflow permissions %v, want contents: read only", wf.Permissions)
	}

	build, ok := wf.Jobs["wheels"]
	if !ok {
		t.Fatal("no wheels job")
	}
	var buildCmd, uploaded, tested string
	for _, s := range build.Steps {
		if strings.Contains(s.Run, "build.sh") {
			buildCmd = strings.TrimSpace(s.Run)
		}
		if strings.Contains(s.Run, "go test") {
			tested = strings.TrimSpace(s.Run)
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			uploaded, _ = s.With["path"].(string)
		}
	}
	// build.sh with -o and no targets builds every target TestWheels checks.
	m := regexp.MustCompile(`^cmd/torchmem/python/build\.sh -o (\S+)$`).FindStringSubmatch(buildCmd)
	if m == nil {
		t.Fatalf("build step %q: want cmd/torchmem/python/build.sh -o DIR (no targets: all four)", buildCmd)
	}
	if uploaded != m[1]+"/*.whl" {
		t.Errorf("uploads %q, the build writes %s/*.whl", uploaded, m[1])
	}
	if tested != "go test ./cmd/torchmem/python" {
		t.Errorf("the wheels job tests with %q, want go test ./cmd/torchmem/python", tested)
	}
	script, err := os.ReadFile("build.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "targets=(" + strings.Join(targets, " ") + ")"; !strings.Contains(string(script), want) {
		t.Errorf("build.sh's default targets are not %s, the ones TestWheels checks", want)
	}

	pub, ok := wf.Jobs["publish"]
	if !ok {
		t.Fatal("no publish job")
	}
	if pub.Needs != "wheels" {
		t.Errorf("publish needs %v, want wheels", pub.Needs)
	}
	if len(pub.Permissions) != 1 || pub.Permissions["id-token"] != "write" {
		t.Errorf("publish permissions %v, want id-token: write only (trusted publishing)", pub.Permissions)
	}
	published := false
	for _, s := range pub.Steps {
		if strings.HasPrefix(s.Uses, "pypa/gh-action-pypi-publish@") {
			published = true
			for k := range s.With {
				if strings.Contains(k, "password") || strings.Contains(k, "token") {
					t.Errorf("publish step passes %q: trusted publishing needs no secret", k)
				}
			}
		}
	}
	if !published {
		t.Error("publish job does not use pypa/gh-action-pypi-publish")
	}
	for name, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Uses != "" && !regexp.MustCompile(`@(v\d+|release/v\d+|[0-9a-f]{40})$`).MatchString(s.Uses) {
				t.Errorf("job %s: %s is not pinned to a version", name, s.Uses)
			}
		}
	}
}
