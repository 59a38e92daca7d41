package examples

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/growth"
)

// figuresLine is one line of examples/tests/figures.py: a series (the last
// LeakWatch window of a steps log in testdata, or of a leak planted into
// one of its healthy series), the Python model's figures of it, and the
// window LeakWatch held when it alarmed (null when it did not).
type figuresLine struct {
	Name   string  `json:"name"`
	Values []int64 `json:"values"`
	Sigma  float64 `json:"sigma"`
	Slope  float64 `json:"slope"`
	S      int     `json:"s"`
	Z      float64 `json:"z"`
	Alarm  *struct {
		Values []int64 `json:"values"`
		Kind   string  `json:"kind"`
		Period int     `json:"period"`
		Next   []int64 `json:"next"`
	} `json:"alarm"`
}

// leakWatchMatchesGoModel reads the figures test_leakwatch.py wrote
// (tests/figures.py, during TestPythonSnippet's run: one Python process)
// and computes Go's memtimeline/growth figures on the same series, so that
// the two cannot drift apart: the noise, the Theil-Sen slope and the
// Mann-Kendall Z agree on every series, and every window LeakWatch alarmed
// on is growth to the Go model too (LeakWatch alarms online, so it may say
// growth later than Go: the converse is not asked).
func leakWatchMatchesGoModel(t *testing.T, out []byte) {
	p := growth.Default()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }
	var series, alarms, later int
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var f figuresLine
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("figures.py: %v: %.200s", err, sc.Text())
		}
		series++
		steps, y := stepsOf(f.Values)
		r := growth.Analyze(steps, y, p)
		tr := growth.TrendOf(steps, y, p)
		if !near(r.Sigma, f.Sigma) || !near(tr.Slope, f.Slope) || !near(tr.Z, f.Z) {
			t.Errorf("%s: Go sigma %v slope %v Z %v, LeakWatch %v %v %v", f.Name, r.Sigma, tr.Slope, tr.Z, f.Sigma, f.Slope, f.Z)
		}
		if f.Alarm == nil {
			continue
		}
		alarms++
		// The Go model reads the whole window at once: a staircase's third
		// jump (LeakWatch's alarm) can be a few rises of uneven spacing to
		// it until the next one confirms the grid. Growth within the next
		// period (the steps that followed, the window sliding on) agrees.
		win := f.Alarm.Values
		for k := 0; ; k++ {
			steps, y = stepsOf(win[max(0, len(win)-64):])
			if r = growth.Analyze(steps, y, p); r.Verdict == growth.Growth || k >= len(f.Alarm.Next) {
				break
			}
			win = append(win, f.Alarm.Next[k])
			later++
		}
		if r.Verdict != growth.Growth {
			t.Errorf("%s: LeakWatch alarmed (%s) on a window the Go model calls %s, and still %d steps later: %s", f.Name, f.Alarm.Kind, r.Verdict, len(f.Alarm.Next), r.Describe("requested bytes"))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Every steps log in testdata (over 120) and the planted leaks: a run
	// that compared little fails.
	if series < 150 || alarms < 50 {
		t.Fatalf("compared %d series, %d alarms: too few", series, alarms)
	}
	t.Logf("%d series, %d alarm windows: the same figures and verdicts (%d steps of the Go model's later than the alarm)", series, alarms, later)
}

func stepsOf(v []int64) ([]int64, []float64) {
	steps := make([]int64, len(v))
	y := make([]float64, len(v))
	for i, x := range v {
		steps[i], y[i] = int64(i), float64(x)
	}
	return steps, y
}
