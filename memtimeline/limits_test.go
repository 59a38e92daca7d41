package memtimeline_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// stream is an endless input made lazily: head once, then body(i) for
// i = 0, 1, 2, ... It never holds more than one piece, so a test can feed
// a reader gigabytes (or forever) without a big file: only a reader that
// stops at its cap ends.
type stream struct {
	head string
	body func(i int) string
	i    int
	buf  []byte
	n    int64 // bytes produced
}

func (s *stream) Read(p []byte) (int, error) {
	if s.head != "" {
		s.buf, s.head = append(s.buf, s.head...), ""
	}
	for len(s.buf) < len(p) {
		s.buf = append(s.buf, s.body(s.i)...)
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
	s.n += int64(n)
	return n, nil
}

func repeat(piece string) func(int) string { return func(int) string { return piece } }

// Every reader stops at its cap on an endless input, with a *chrometrace.CountLimitError
// that names the cap, and having read no more than the cap needs.
func TestReadersStopAtCaps(t *testing.T) {
	lim := chrometrace.Limits{InputBytes: 4 << 20, Records: 10_000, Series: 100}
	smiHeader := "timestamp, index, memory.used [MiB], memory.total [MiB]\n"
	smiRow := func(gpu func(i int) int) func(int) string {
		return func(i int) string {
			return fmt.Sprintf("2024/01/01 00:00:%02d.000, %d, %d MiB, 81559 MiB\n", i%60, gpu(i), 1000+i%7)
		}
	}
	cases := []struct {
		name  string
		in    *stream
		read  func(io.Reader, chrometrace.Limits) error
		what  string
		limit int64
	}{
		{"timeline array of 0,", &stream{head: "[[", body: repeat("0,")}, parseTimeline, "timeline points", 10_000},
		{"raw timeline events", &stream{head: "[[1,2,3,0]", body: repeat(",[1,2,3,0]")}, parseTimeline, "timeline events", 10_000},
		{"timeline of spaces", &stream{head: "[[", body: repeat(strings.Repeat(" ", 1000) + "0,")}, parseTimeline, "decompressed bytes", 4 << 20},
		{"smi rows", &stream{head: smiHeader, body: smiRow(func(int) int { return 0 })}, readSMI, "nvidia-smi rows", 8 * 10_000},
		{"smi distinct GPUs", &stream{head: smiHeader, body: smiRow(func(i int) int { return i })}, readSMI, "distinct GPUs", 100},
		{"step records", &stream{body: func(i int) string { return fmt.Sprintf(`{"step": %d, "allocated_bytes": 1}`+"\n", i) }}, readSteps, "per-step records", 10_000},
		{"summary ranks", &stream{body: func(i int) string { return fmt.Sprintf("rank%d: |  PyTorch CUDA memory summary, device ID 0  |\n", i) }}, readSummaries, "distinct ranks", 100},
		{"step devices", &stream{body: func(i int) string {
			return fmt.Sprintf(`{"step": 1, "device": "cuda:%d", "allocated_bytes": 1}`+"\n", i)
		}}, readSteps, "distinct devices", 100},
	}
	for _, c := range cases {
		err := c.read(memtimeline.LimitInput(c.in, lim.InputBytes), lim)
		var le *chrometrace.CountLimitError
		if !errors.As(err, &le) || le.What != c.what || le.Limit != c.limit {
			t.Errorf("%s: error %v, want the cap of %d %s", c.name, err, c.limit, c.what)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprint(c.limit)) || !strings.Contains(err.Error(), "--max-") {
			t.Errorf("%s: %q does not name the cap and its flag", c.name, err)
		}
		if c.in.n > lim.InputBytes+1<<20 {
			t.Errorf("%s: read %d bytes past a %d-byte cap", c.name, c.in.n, lim.InputBytes)
		}
	}
}

// Each reader as the cases call it: only whether it refused matters.
var (
	parseTimeline = refusal(exported.ReadLimited)
	readSMI       = refusal(smi.ReadLimited)
	readSteps     = refusal(steplog.ReadLimited)
	readSummaries = refusal(memsummary.ReadLimited)
)

func refusal[T any](read func(io.Reader, chrometrace.Limits) (T, error)) func(io.Reader, chrometrace.Limits) error {
	return func(r io.Reader, lim chrometrace.Limits) error {
		_, err := read(r, lim)
		return err
	}
}

// A run of white space in a timeline stops at --max-value-bytes, as in a
// trace, however long the input.
func TestTimelineWhiteSpaceRun(t *testing.T) {
	in := &stream{head: "[[1, 2,", body: repeat(strings.Repeat(" ", 4096))}
	_, err := exported.ReadLimited(in, chrometrace.Limits{ValueBytes: 1 << 20})
	var le *chrometrace.LimitError
	if !errors.As(err, &le) || le.What != "a run of white space" || le.Offset != 7 {
		t.Fatalf("error %v, want a white space run limit at byte 7", err)
	}
	if in.n > 2<<20 {
		t.Errorf("read %d bytes past a 1 MiB cap", in.n)
	}
}

// A run of blank lines stops at --max-value-bytes in the line readers.
func TestBlankLineRun(t *testing.T) {
	for name, c := range map[string]struct {
		head string
		read func(io.Reader, chrometrace.Limits) error
	}{
		"smi":   {"timestamp, index, memory.used [MiB]\n2024/01/01 00:00:01.000, 0, 1000 MiB\n", readSMI},
		"steps": {`{"step": 1, "allocated_bytes": 1}` + "\n", readSteps},
	} {
		in := &stream{head: c.head, body: repeat(strings.Repeat("\n", 100) + strings.Repeat(" ", 100))}
		var le *chrometrace.LimitError
		if err := c.read(in, chrometrace.Limits{ValueBytes: 1 << 20}); !errors.As(err, &le) || le.What != "a run of blank lines" {
			t.Errorf("%s: %v", name, err)
		}
		if in.n > 2<<20 {
			t.Errorf("%s: read %d bytes past a 1 MiB cap", name, in.n)
		}
	}
}

// A line without end is refused at the line cap, whatever follows.
func TestEndlessLine(t *testing.T) {
	for name, read := range map[string]func(io.Reader, chrometrace.Limits) error{"smi": readSMI, "steps": readSteps} {
		in := &stream{head: `{"step": 1, "allocated_bytes": "`, body: repeat(strings.Repeat("x", 4096))}
		if err := read(in, chrometrace.Limits{InputBytes: 1 << 40}); err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("%s: %v", name, err)
		}
		if in.n > 4<<20 {
			t.Errorf("%s: read %d bytes of one line", name, in.n)
		}
	}
}

// An input of exactly the cap is read whole; LimitInput only fails when
// there is more.
func TestLimitInputExact(t *testing.T) {
	b, err := io.ReadAll(memtimeline.LimitInput(strings.NewReader("0123456789"), 10))
	if err != nil || string(b) != "0123456789" {
		t.Errorf("%q, %v", b, err)
	}
	_, err = io.ReadAll(memtimeline.LimitInput(strings.NewReader("0123456789A"), 10))
	var le *chrometrace.CountLimitError
	if !errors.As(err, &le) {
		t.Errorf("11 bytes through a 10-byte cap: %v", err)
	}
}

// manyGPUs is an nvidia-smi log with one row per GPU index.
func manyGPUs(n int) string {
	var b strings.Builder
	b.WriteString("timestamp, index, memory.used [MiB], memory.total [MiB]\n")
	for i := range n {
		fmt.Fprintf(&b, "2024/01/01 00:00:01.000, %d, 1000 MiB, 81559 MiB\n", i)
	}
	return b.String()
}

// A log longer than the records cap is thinned, not refused, up to every
// 8th row: each GPU keeps evenly spaced samples over the whole log, and a
// warning says so.
func TestSMIThinsLongLogs(t *testing.T) {
	var b strings.Builder
	b.WriteString("timestamp, index, memory.used [MiB]\n")
	const rounds = 3000 // 6000 rows of 2 GPUs: thinned to every 8th
	for i := range rounds {
		for gpu := range 2 {
			fmt.Fprintf(&b, "2024/01/01 %02d:%02d:%02d.000, %d, %d MiB\n", i/3600, i/60%60, i%60, gpu, 1000+i)
		}
	}
	log, err := smi.ReadLimited(strings.NewReader(b.String()), chrometrace.Limits{Records: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if log.Rows != 2*rounds || len(log.Warnings) != 1 || !strings.Contains(log.Warnings[0], "every 8th sample") {
		t.Fatalf("rows %d, warnings %q", log.Rows, log.Warnings)
	}
	for _, g := range log.GPUs {
		n := len(g.Samples)
		if n != rounds/8 {
			t.Errorf("GPU %s: %d samples, want %d", g.Key, n, rounds/8)
		}
		for j, s := range g.Samples {
			if want := int64(1000+8*j) << 20; s.UsedBytes != want {
				t.Fatalf("GPU %s sample %d: %d bytes, want %d (row %d)", g.Key, j, s.UsedBytes, want, 8*j)
			}
		}
	}
}

// GPU finds every GPU by key, also after the GPUs were filtered.
func TestSMIGPULookup(t *testing.T) {
	log, err := smi.Read(strings.NewReader(manyGPUs(1000)))
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range log.GPUs {
		if got := log.GPU(fmt.Sprint(i)); got != g {
			t.Fatalf("GPU(%d) = %v, want %v", i, got, g)
		}
	}
	if log.GPU("1000") != nil || log.GPU("x") != nil {
		t.Error("found a GPU the log does not have")
	}
	keep := log.GPUs[500]
	log.GPUs = []*smi.GPU{keep}
	if log.GPU("500") != keep || log.GPU("0") != nil {
		t.Error("lookup after filtering GPUs")
	}
}

// BenchmarkSMIManyGPUs reads a log with one row per GPU and looks each GPU
// up, as the smi command's renderers do: linear in the GPUs (it was
// quadratic: 60k GPUs took 77 s).
func BenchmarkSMIManyGPUs(b *testing.B) {
	for _, n := range []int{20_000, 60_000} {
		in := manyGPUs(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				log, err := smi.Read(strings.NewReader(in))
				if err != nil {
					b.Fatal(err)
				}
				for _, g := range log.GPUs {
					if log.GPU(g.Key) != g {
						b.Fatal("lookup")
					}
				}
			}
		})
	}
}

// Snapshot sizes of 2^63-1 saturate: the sums printed stay at the
// maximum instead of wrapping to "-2 B".
func TestSnapshotSumsSaturate(t *testing.T) {
	const huge = math.MaxInt64
	s := &snapshot.Snapshot{Segments: []snapshot.Segment{
		{TotalSize: huge, Blocks: []snapshot.Block{{Size: huge, RequestedSize: huge, State: snapshot.BlockActiveAllocated}, {Size: huge, State: snapshot.BlockInactive}}},
		{TotalSize: huge, Blocks: []snapshot.Block{{Size: huge, RequestedSize: huge, State: snapshot.BlockActiveAllocated}, {Size: huge, State: snapshot.BlockInactive}}},
	}}
	st := s.Stats()
	for name, v := range map[string]int64{"reserved": st.ReservedBytes, "allocated": st.AllocatedBytes, "active": st.ActiveBytes,
		"requested": st.RequestedBytes, "free": st.FreeBytes, "inactive split": st.InactiveSplitBytes} {
		if v != huge {
			t.Errorf("%s = %d, want %d", name, v, int64(huge))
		}
	}
}
