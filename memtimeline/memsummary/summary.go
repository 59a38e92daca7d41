package memsummary

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// Summary is one torch.cuda.memory_summary() table: the caching
// allocator's counters on one device at one moment. Sizes are bytes as
// torch printed them: torch rounds down to whole KiB/MiB/GiB, so a value
// may be up to one unit low.
type Summary struct {
	// Line is the 1-based line of the table's title in the log.
	Line   int `json:"line"`
	Device int `json:"device"`
	// Rank is read from a logger prefix ("rank3:"), or -1.
	Rank int `json:"rank"`
	// Step is the last "step N" the log printed before the table, or -1.
	Step int64 `json:"step"`
	// Time is the logger prefix's timestamp, when it has one.
	Time time.Time `json:"time,omitzero"`

	AllocatedBytes         int64 `json:"allocated_bytes"`
	AllocatedPeakBytes     int64 `json:"allocated_peak_bytes"`
	ReservedBytes          int64 `json:"reserved_bytes"`
	ReservedPeakBytes      int64 `json:"reserved_peak_bytes"`
	ActiveBytes            int64 `json:"active_bytes"`
	ActivePeakBytes        int64 `json:"active_peak_bytes"`
	NonReleasableBytes     int64 `json:"non_releasable_bytes"`
	NonReleasablePeakBytes int64 `json:"non_releasable_peak_bytes"`
	// RequestedBytes is the "Requested memory" row (torch 2.1 and
	// later): what the callers asked for, without the allocator's
	// rounding; -1 when the table has no such row.
	RequestedBytes     int64 `json:"requested_bytes"`
	RequestedPeakBytes int64 `json:"requested_peak_bytes"`
	// Allocations is the "Allocations" row's current count.
	Allocations int64 `json:"allocations"`
	// Retries counts cudaMalloc retries: the allocator freed its cache and
	// tried again, a sign of memory pressure or fragmentation.
	Retries int64 `json:"cuda_malloc_retries"`
	OOMs    int64 `json:"ooms"`
}

// Log is every memory_summary() table found in one text file.
type Log struct {
	Samples []Summary `json:"samples"`
	Lines   int       `json:"lines"`
	// Warnings are what the reader tolerated (overlong lines, a table cut
	// off by the end of the file).
	Warnings []string `json:"warnings,omitempty"`
}

// summaryMaxLine bounds one line; longer ones (progress bars redrawn with
// \r, dumped tensors) are skipped, not buffered.
const summaryMaxLine = 64 << 10

// maxTables caps the tables read from one log: an eighth of the records
// cap (256K by default, 8 million lines of tables). A table costs 150
// bytes held; 2 million title lines alone took 1.2 GB.
func maxTables(lim chrometrace.Limits) int { return max(lim.Records/8, 1) }

// ErrNotSummary marks a text with no memory_summary() table in it.
var ErrNotSummary = errors.New("no torch.cuda.memory_summary() table in it")

var (
	summaryTitle = regexp.MustCompile(`PyTorch CUDA memory summary, device ID (\d+)`)
	summaryOOMs  = regexp.MustCompile(`CUDA OOMs:\s*(\d+)\s*\|\s*cudaMalloc retries:\s*(\d+)`)
	summaryRank  = regexp.MustCompile(`(?i)\brank[ _\-:\[]*(\d+)`)
	summaryStep  = regexp.MustCompile(`(?i)\b(?:step|iter(?:ation)?)[ _#:=\[]*(\d+)`)
	summaryTime  = regexp.MustCompile(`(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?`)
)

// LooksLike reports whether head, the first bytes of a file,
// holds a memory_summary() table (alone or inside a training log).
func LooksLike(head []byte) bool {
	return summaryTitle.Match(head) ||
		(bytes.Contains(head, []byte("| Allocated memory")) && bytes.Contains(head, []byte("Cur Usage")))
}

// Read finds every memory_summary() table in a text, also
// when each line carries a logger prefix ("2026-11-30 12:00:01 INFO rank0:
// |  Allocated memory ..."). Tables of different ranks may interleave;
// each table is one sample.
func Read(r io.Reader) (*Log, error) { return ReadLimited(r, chrometrace.Limits{}) }

// ReadLimited is Read within lim (InputBytes, Records, Series; zero
// fields are the defaults).
func ReadLimited(r io.Reader, lim chrometrace.Limits) (*Log, error) {
	lim = lim.WithDefaults()
	br := bufio.NewReaderSize(memtimeline.LimitInput(r, lim.InputBytes), summaryMaxLine)
	log := &Log{}
	open := map[int]*Summary{} // rank -> table being read
	lastStep := map[int]int64{}
	lastAny := int64(-1) // the last step any line named
	skipped := 0
	finish := func(rank int) {
		s := open[rank]
		delete(open, rank)
		if s != nil {
			log.Samples = append(log.Samples, *s)
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Skip the rest of an overlong line.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			log.Lines++
			skipped++
			if errors.Is(err, chrometrace.ErrGzipTruncated) {
				log.Warnings = append(log.Warnings, fmt.Sprintf("line %d: the file is cut off (%v); read up to the cut", log.Lines, err))
				break
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			if err == io.EOF {
				break
			}
			continue
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		if errors.Is(err, chrometrace.ErrGzipTruncated) {
			log.Warnings = append(log.Warnings, fmt.Sprintf("line %d: the file is cut off (%v); read up to the cut", log.Lines+1, err))
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("line %d: %w", log.Lines+1, err)
		}
		log.Lines++
		text := strings.TrimRight(string(line), "\r\n")
		bar := strings.IndexByte(text, '|')
		prefix := text
		if bar >= 0 {
			prefix = text[:bar]
		}
		rank := -1
		if m := summaryRank.FindStringSubmatch(prefix); m != nil {
			rank = atoiOr(m[1], -1)
			if _, seen := lastStep[rank]; !seen && open[rank] == nil && len(lastStep)+len(open) >= lim.Series {
				return nil, fmt.Errorf("line %d: %w", log.Lines, memtimeline.SeriesError("distinct ranks", lim.Series))
			}
		}
		if bar < 0 {
			if m := summaryStep.FindAllStringSubmatch(text, -1); m != nil {
				lastStep[rank] = int64(atoiOr(m[len(m)-1][1], -1))
				lastAny = lastStep[rank]
			}
			finish(rank)
			if err == io.EOF {
				break
			}
			continue
		}
		if m := summaryStep.FindAllStringSubmatch(prefix, -1); m != nil {
			lastStep[rank] = int64(atoiOr(m[len(m)-1][1], -1))
			lastAny = lastStep[rank]
		}
		row := text[bar:]
		if m := summaryTitle.FindStringSubmatch(row); m != nil {
			finish(rank)
			s := &Summary{Line: log.Lines, Device: atoiOr(m[1], -1), Rank: rank, Step: -1, RequestedBytes: -1, RequestedPeakBytes: -1}
			if st, ok := lastStep[rank]; ok {
				s.Step = st
			} else if st, ok := lastStep[-1]; ok {
				s.Step = st
			} else if rank < 0 {
				// A table logged as one record: only the line before it
				// carries the logger's prefix (and its rank).
				s.Step = lastAny
			}
			if m := summaryTime.FindStringSubmatch(prefix); m != nil {
				s.Time = parseLogTime(m)
			}
			open[rank] = s
			if len(log.Samples)+len(open) > maxTables(lim) {
				return nil, &chrometrace.CountLimitError{What: "memory_summary() tables (an eighth of the records cap: a table is about 30 lines, and 150 bytes held)", Limit: int64(maxTables(lim)), Flag: "max-records"}
			}
			if len(open) > lim.Series {
				return nil, memtimeline.SeriesError("ranks with memory_summary() tables", lim.Series)
			}
		} else if s := open[rank]; s != nil {
			if !summaryRow(s, row) {
				finish(rank)
			}
		}
		if err == io.EOF {
			break
		}
	}
	for rank, s := range open {
		if s.AllocatedBytes == 0 && s.ReservedBytes == 0 {
			log.Warnings = append(log.Warnings, fmt.Sprintf("line %d: a memory summary cut off before its numbers", s.Line))
			delete(open, rank)
		}
	}
	// Tables still open at the end (the file ends with one) are complete
	// enough when their numbers were read; keep them in line order.
	var rest []int
	for rank := range open {
		rest = append(rest, rank)
	}
	slices.SortFunc(rest, func(a, b int) int { return open[a].Line - open[b].Line })
	for _, r := range rest {
		finish(r)
	}
	if skipped > 0 {
		log.Warnings = append(log.Warnings, fmt.Sprintf("skipped %d lines longer than %d bytes", skipped, summaryMaxLine))
	}
	if len(log.Samples) == 0 {
		return nil, ErrNotSummary
	}
	sortSummaries(log.Samples)
	return log, nil
}

// sortSummaries orders samples by their line (tables finish out of order
// when ranks interleave).
func sortSummaries(s []Summary) {
	slices.SortStableFunc(s, func(a, b Summary) int { return cmp.Compare(a.Line, b.Line) })
}

// summaryRow reads one row of a table into s. It returns false when the
// row ends the table (the closing rule after the last row).
func summaryRow(s *Summary, row string) bool {
	if m := summaryOOMs.FindStringSubmatch(row); m != nil {
		s.OOMs, s.Retries = int64(atoiOr(m[1], 0)), int64(atoiOr(m[2], 0))
		return true
	}
	cells := strings.Split(strings.Trim(row, "| \t"), "|")
	if len(cells) < 3 {
		return true // rules (|-----|, |=====|)
	}
	name := strings.TrimSpace(cells[0])
	cur, peak := summaryValue(cells[1]), summaryValue(cells[2])
	switch name {
	case "Allocated memory":
		s.AllocatedBytes, s.AllocatedPeakBytes = cur, peak
	case "Active memory":
		s.ActiveBytes, s.ActivePeakBytes = cur, peak
	case "Requested memory":
		s.RequestedBytes, s.RequestedPeakBytes = cur, peak
	case "GPU reserved memory":
		s.ReservedBytes, s.ReservedPeakBytes = cur, peak
	case "Non-releasable memory":
		s.NonReleasableBytes, s.NonReleasablePeakBytes = cur, peak
	case "Allocations":
		s.Allocations = cur
	case "Oversize GPU segments":
		return false
	}
	return true
}

var summaryUnits = map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "K": 1000, "M": 1000000}

// summaryValue reads "720896 KiB", "0 B", "11", "12K" as torch's
// _format_size and _format_count print them (saturating).
func summaryValue(cell string) int64 {
	f := strings.Fields(cell)
	if len(f) == 0 {
		return 0
	}
	num := f[0]
	unit := "B"
	if len(f) > 1 {
		unit = f[1]
	} else if n := len(num); n > 1 && (num[n-1] == 'K' || num[n-1] == 'M') {
		num, unit = num[:n-1], num[n-1:]
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	mul, ok := summaryUnits[unit]
	if !ok {
		return v
	}
	if v > (1<<63-1)/mul {
		return 1<<63 - 1
	}
	return v * mul
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func parseLogTime(m []string) time.Time {
	frac := m[3]
	layout := "2006-01-02 15:04:05"
	v := m[1] + " " + m[2]
	if frac != "" {
		layout += "." + strings.Repeat("0", len(frac))
		v += "." + frac
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// StepLog turns the tables into a per-step memory log, one series per
// rank and device, so that step-growth detection, the rules and the
// charts read memory_summary() logs like memory_stats() ones. A table's
// step is the last "step N" the log printed before it; when the log names
// no steps, tables are numbered 0, 1, 2, ... and growth is per summary
// interval.
func (l *Log) StepLog() *steplog.Log {
	out := &steplog.Log{Keys: map[string]string{
		"allocated": "Allocated memory (memory_summary)", "reserved": "GPU reserved memory (memory_summary)",
		"active": "Active memory (memory_summary)", "peak_allocated": "Allocated memory peak (memory_summary)",
		"peak_reserved": "GPU reserved memory peak (memory_summary)",
	}, Lines: len(l.Samples), Warnings: l.Warnings, TotalMemoryBytes: -1, MemoryFraction: -1, HistoryMaxEntries: -1}
	type key struct{ rank, device int }
	series := map[key]*steplog.Series{}
	var order []key
	byStep := true
	for _, s := range l.Samples {
		byStep = byStep && s.Step >= 0
	}
	if byStep {
		out.Keys["step"] = `the last "step N" before each table`
	} else {
		out.Keys["step"] = "summary number (no step in the log)"
	}
	last := map[key]int64{}
	for _, s := range l.Samples {
		k := key{s.Rank, s.Device}
		ser := series[k]
		if ser == nil {
			ser = &steplog.Series{Device: strconv.Itoa(s.Device)}
			if s.Rank >= 0 {
				ser.Device = fmt.Sprintf("rank%d:%d", s.Rank, s.Device)
			}
			series[k] = ser
			order = append(order, k)
		}
		step := int64(len(ser.Records))
		if byStep {
			step = s.Step
			if prev, ok := last[k]; ok && step <= prev {
				step = prev + 1 // two tables after one step line
			}
			last[k] = step
		}
		rec := steplog.Record{Step: step, AllocatedBytes: s.AllocatedBytes, ReservedBytes: s.ReservedBytes, ActiveBytes: s.ActiveBytes,
			PeakAllocatedBytes: s.AllocatedPeakBytes, PeakReservedBytes: s.ReservedPeakBytes, AllocRetries: s.Retries, InactiveSplitBytes: s.NonReleasableBytes, OOMs: s.OOMs, Line: s.Line}
		rec.NotRecorded()
		// Requested bytes are the series the growth model reads first
		// (no allocator rounding), as requested_bytes in a steps log.
		rec.RequestedBytes = s.RequestedBytes
		if s.RequestedBytes >= 0 {
			out.Keys["requested"] = "Requested memory (memory_summary)"
		}
		if !s.Time.IsZero() {
			rec.Time, rec.HasTime = float64(s.Time.UnixNano())/1e9, true
		}
		ser.Records = append(ser.Records, rec)
	}
	for _, k := range order {
		out.Series = append(out.Series, series[k])
	}
	return out
}

// Frag is what memory_summary() tables say about fragmentation:
// non-releasable memory is free space inside blocks the allocator cannot
// give back (torch's inactive split), and cudaMalloc retries count the
// times it had to free its cache and try again.
type Frag struct {
	Device int `json:"device"`
	Rank   int `json:"rank"`
	// Last table's figures.
	ReservedBytes          int64 `json:"reserved_bytes"`
	NonReleasableBytes     int64 `json:"non_releasable_bytes"`
	NonReleasablePeakBytes int64 `json:"non_releasable_peak_bytes"`
	// NonReleasableFraction is non-releasable over reserved, at the table
	// where that share was largest.
	NonReleasableFraction float64 `json:"non_releasable_fraction"`
	MaxNonReleasableLine  int     `json:"max_non_releasable_line"`
	Retries               int64   `json:"cuda_malloc_retries"`
	// RetriesDuringLog is how many retries happened between the first
	// and the last table.
	RetriesDuringLog int64 `json:"retries_during_log"`
	OOMs             int64 `json:"ooms"`
	Samples          int   `json:"samples"`
}

// Frag gives the fragmentation figures per rank and device.
func (l *Log) Frag() []Frag {
	type key struct{ rank, device int }
	idx := map[key]int{}
	var out []Frag
	for _, s := range l.Samples {
		k := key{s.Rank, s.Device}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Frag{Device: s.Device, Rank: s.Rank, RetriesDuringLog: -s.Retries})
		}
		f := &out[i]
		f.Samples++
		f.ReservedBytes, f.NonReleasableBytes, f.Retries, f.OOMs = s.ReservedBytes, s.NonReleasableBytes, s.Retries, s.OOMs
		f.NonReleasablePeakBytes = max(f.NonReleasablePeakBytes, s.NonReleasablePeakBytes)
		if s.ReservedBytes > 0 {
			if frac := float64(s.NonReleasableBytes) / float64(s.ReservedBytes); frac > f.NonReleasableFraction {
				f.NonReleasableFraction, f.MaxNonReleasableLine = frac, s.Line
			}
		}
	}
	for i := range out {
		out[i].RetriesDuringLog += out[i].Retries
	}
	return out
}
