package growth

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestLeakWatchConstants: the snippet's LeakWatch (examples/torchmem_profile.py)
// runs the same model with the same constants; a change on one side only
// fails here.
func TestLeakWatchConstants(t *testing.T) {
	src, err := os.ReadFile("../../examples/torchmem_profile.py")
	if err != nil {
		t.Fatal(err)
	}
	p := Default()
	want := map[string]float64{
		"JUMP_K":              p.JumpK,
		"GROWTH_Z":            p.ZCrit,
		"SIGMA_FLOOR":         p.SigmaFloor,
		"GROWTH_MIN_STEPS":    float64(p.MinSteps),
		"STAIRCASE_MIN_JUMPS": float64(p.MinJumps),
		"PLATEAU_MIN_STEPS":   float64(p.PlateauMin),
		"PLATEAU_NOISE":       p.PlateauC,
	}
	for name, v := range want {
		m := regexp.MustCompile(`(?m)^` + name + ` = ([0-9.]+)\s*$`).FindSubmatch(src)
		if m == nil {
			t.Errorf("%s not found in torchmem_profile.py", name)
			continue
		}
		got, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil || got != v {
			t.Errorf("torchmem_profile.py %s = %s, Go %v", name, m[1], v)
		}
	}
}
