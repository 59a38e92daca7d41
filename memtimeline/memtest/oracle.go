package memtest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip" // the stdlib's API, a faster inflate
)

// An oracle that reads the raw JSON with encoding/json, independent of
// chrometrace's model, for the facts the rules must agree with.

type rawTimelineEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args json.RawMessage `json:"args"`
}

type rawDeviceArgs struct {
	Device    int     `json:"device"`
	Bytes     int64   `json:"bytes"`
	Bandwidth float64 `json:"memory bandwidth (GB/s)"`
}

// Oracle is what a Kineto trace records, read with encoding/json apart from
// chrometrace: the tests' independent answer.
type Oracle struct {
	Steps  [][2]int64         // host ProfilerStep windows, ns, sorted
	Device map[int][][2]int64 // kernels, copies and memsets by device, ns
	Copies []OracleCopy
}

// OracleCopy is one gpu_memcpy as Kineto recorded it.
type OracleCopy struct {
	Name      string
	Start     int64
	Bytes     int64
	Bandwidth float64 // Kineto's own "memory bandwidth (GB/s)"
}

// microsToNs parses Kineto's "123.456" microseconds exactly.
func microsToNs(n json.Number) (int64, error) {
	s := string(n)
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000")[:3]
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return w*1000 + f, nil
}

// ReadOracle reads a Kineto trace (gzipped or not) as the oracle.
func ReadOracle(t testing.TB, path string) *Oracle {
	t.Helper()
	o, err := readOracle(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return o
}

func readOracle(path string) (*Oracle, error) {
	data, err := readWhole(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		TraceEvents []rawTimelineEvent `json:"traceEvents"`
	}
	// Unmarshal on the whole text: a json.Decoder reading the stream grew
	// its buffer by doubling and copying (a 76 MB trace: half the oracle's
	// CPU). Ts and Dur are json.Number fields either way. The events' slice
	// sized from the "ph" keys (Unmarshal appends to it): growing it was a
	// fifth.
	doc.TraceEvents = make([]rawTimelineEvent, 0, bytes.Count(data, []byte(`"ph"`)))
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	o := &Oracle{Device: map[int][][2]int64{}}
	seenStep := map[string]bool{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		start, err := microsToNs(e.Ts)
		if err != nil {
			return nil, err
		}
		dur, err := microsToNs(e.Dur)
		if err != nil {
			return nil, err
		}
		end := start + dur
		switch e.Cat {
		case "user_annotation":
			if strings.HasPrefix(e.Name, "ProfilerStep#") && !seenStep[e.Name] {
				seenStep[e.Name] = true
				o.Steps = append(o.Steps, [2]int64{start, end})
			}
		case "kernel", "gpu_memcpy", "gpu_memset":
			var a rawDeviceArgs
			if err := json.Unmarshal(e.Args, &a); err != nil {
				return nil, err
			}
			o.Device[a.Device] = append(o.Device[a.Device], [2]int64{start, end})
			if e.Cat == "gpu_memcpy" {
				o.Copies = append(o.Copies, OracleCopy{Name: e.Name, Start: start, Bytes: a.Bytes, Bandwidth: a.Bandwidth})
			}
		}
	}
	slices.SortFunc(o.Steps, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	return o, nil
}

// readWhole reads the file at path, gunzipped when it is gzip, into a
// buffer sized from the file (a gzip file's ISIZE trailer: its size
// mod 4 GiB), so that it is not copied through a dozen doublings.
func readWhole(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) < 18 || raw[0] != 0x1f || raw[1] != 0x8b {
		return raw, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, int(binary.LittleEndian.Uint32(raw[len(raw)-4:]))+bytes.MinRead))
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// IdleFractions clips the device's ranges to each step, sorts and unions
// them: the plain way, against the rule's merged-then-searched intervals.
func (o *Oracle) IdleFractions(dev int) []float64 {
	var out []float64
	for _, s := range o.Steps {
		var clipped [][2]int64
		for _, iv := range o.Device[dev] {
			a, b := max(iv[0], s[0]), min(iv[1], s[1])
			if b > a {
				clipped = append(clipped, [2]int64{a, b})
			}
		}
		slices.SortFunc(clipped, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		var busy, curS, curE int64
		open := false
		for _, iv := range clipped {
			if open && iv[0] <= curE {
				curE = max(curE, iv[1])
				continue
			}
			if open {
				busy += curE - curS
			}
			curS, curE, open = iv[0], iv[1], true
		}
		if open {
			busy += curE - curS
		}
		out = append(out, 1-float64(busy)/float64(s[1]-s[0]))
	}
	return out
}

// CopiesNamed are the copies whose name starts with prefix, of at least
// minBytes.
func (o *Oracle) CopiesNamed(prefix string, minBytes int64) []OracleCopy {
	var out []OracleCopy
	for _, c := range o.Copies {
		if strings.HasPrefix(c.Name, prefix) && c.Bytes >= minBytes {
			out = append(out, c)
		}
	}
	return out
}

// StepsWith counts the steps in which one of the copies ran on the device.
// The rules place a copy by its host launch; in these traces each copy also
// starts inside its step, which the oracle checks instead.
func (o *Oracle) StepsWith(copies []OracleCopy) int {
	n := 0
	for _, s := range o.Steps {
		for _, c := range copies {
			if c.Start >= s[0] && c.Start <= s[1] {
				n++
				break
			}
		}
	}
	return n
}
