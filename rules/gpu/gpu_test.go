package gpu_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/gpu"
)

// realTraces are the recorded traces with a device lane; big_transformer
// (76 MB of JSON for the oracle) only without -short.
func realTraces(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pattern := range [][]string{{"traces", "*", "trace.json.gz"}, {"gputimeline", "*", "trace.json.gz"}, {"gpu", "amp_item_sync_slow_loader", "trace.json.gz"}} {
		m, err := filepath.Glob(memtest.Testdata(pattern...))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			if testing.Short() && strings.Contains(p, "big_transformer") {
				continue
			}
			out = append(out, p)
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d recorded traces: %v", len(out), out)
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// Each step's idle time on each GPU, from the merged busy intervals
// searched per step, is what Kineto recorded: the oracle clips every
// kernel, copy and memset to the step and unions them the plain way.
func TestIdleInWindowMatchesKineto(t *testing.T) {
	for _, path := range realTraces(t) {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			tr, o := memtest.SharedTrace(t, path), memtest.SharedOracle(t, path)
			w := gpu.StepWindows(tr)
			if w.WholeTrace || len(w.List) != len(o.Steps) {
				t.Fatalf("%d step windows (whole trace %v), Kineto has %d ProfilerSteps", len(w.List), w.WholeTrace, len(o.Steps))
			}
			busy := gpu.DeviceBusy(tr)
			if len(busy) != len(o.Device) {
				t.Errorf("%d busy devices, Kineto %d", len(busy), len(o.Device))
			}
			for dev := range o.Device {
				want := o.IdleFractions(dev)
				for i, s := range w.List {
					if s.Start != o.Steps[i][0] || s.End != o.Steps[i][1] {
						t.Fatalf("step %d: window %d..%d, Kineto %d..%d", i, s.Start, s.End, o.Steps[i][0], o.Steps[i][1])
					}
					got := gpu.IdleInWindow(busy[int16(dev)], s)
					if !near(got.Fraction, want[i], 1e-9) {
						t.Errorf("GPU %d step #%d: idle %.6f, Kineto %.6f", dev, s.Number, got.Fraction, want[i])
					}
					if got.Gap.End-got.Gap.Start > got.Idle || got.Idle > s.End-s.Start {
						t.Errorf("GPU %d step #%d: largest gap %d ns of %d ns idle in a %d ns step", dev, s.Number, got.Gap.End-got.Gap.Start, got.Idle, s.End-s.Start)
					}
				}
			}
		})
	}
}

// Every host<->device copy Kineto recorded is found, in its direction,
// with its bytes and the bandwidth Kineto computed for it.
func TestHostCopiesMatchKineto(t *testing.T) {
	for _, path := range realTraces(t) {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			tr, o := memtest.SharedTrace(t, path), memtest.SharedOracle(t, path)
			copies := gpu.FindHostCopies(tr)
			for _, c := range []struct {
				dir    gpu.Direction
				prefix string
			}{{gpu.H2D, "Memcpy HtoD"}, {gpu.D2H, "Memcpy DtoH"}} {
				want := o.CopiesNamed(c.prefix, 0)
				var n int
				var bytes, wantBytes int64
				var best, wantBest float64
				for _, hc := range copies {
					if hc.Dir != c.dir {
						continue
					}
					n++
					bytes += hc.Bytes
					if hc.Dur > 0 {
						best = max(best, gpu.GBps(hc.Bytes, hc.Dur))
					}
					if hc.Pageable != strings.Contains(tr.Str(tr.DeviceOps[hc.Op].Name), "Pageable") {
						t.Errorf("%s: pageable %v", tr.Str(tr.DeviceOps[hc.Op].Name), hc.Pageable)
					}
				}
				for _, k := range want {
					wantBytes += k.Bytes
					wantBest = max(wantBest, k.Bandwidth)
				}
				if n != len(want) || bytes != wantBytes || !near(best, wantBest, 1e-6) {
					t.Errorf("%s: %d copies, %d bytes, best %.3f GB/s; Kineto %d, %d, %.3f", c.dir, n, bytes, best, len(want), wantBytes, wantBest)
				}
			}
		})
	}
}
