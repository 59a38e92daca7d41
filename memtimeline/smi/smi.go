package smi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/internal/lines"
)

// This file reads the CSV that `nvidia-smi --query-gpu=... --format=csv`
// prints, once or in a loop (-l / -lms). nvidia-smi is what people have
// when no profiler ran, so the reader is lenient about everything the
// tool lets a user vary: column order and choice, units in the header or
// in the values (nounits), no header at all (noheader), several GPUs
// interleaved, the header repeated when logs are concatenated, and
// "[Not Supported]" / "[N/A]" values. What it cannot make sense of is an
// error naming the line.

// SMI column names as nvidia-smi prints them in the header (without the
// " [unit]" suffix). Only the ones the analysis uses are named here.
const (
	ColIndex       = "index"
	ColTimestamp   = "timestamp"
	ColName        = "name"
	ColBusID       = "pci.bus_id"
	ColUUID        = "uuid"
	ColMemUsed     = "memory.used"
	ColMemTotal    = "memory.total"
	ColMemFree     = "memory.free"
	ColMemReserved = "memory.reserved"
	ColUtilGPU     = "utilization.gpu"
	ColUtilMem     = "utilization.memory"
)

// smiAliases maps the alternative spellings --query-gpu accepts to the
// name nvidia-smi prints in its header.
var smiAliases = map[string]string{
	"gpu_uuid":   ColUUID,
	"gpu_bus_id": ColBusID,
	"gpu_name":   ColName,
}

// Sample is one row of the log: one GPU at one time. Missing values
// ("[N/A]", "[Not Supported]", or a column not queried) are -1.
type Sample struct {
	Time          time.Time
	UsedBytes     int64
	TotalBytes    int64
	UtilGPUPct    float64
	UtilMemoryPct float64
}

// GPU is the time series of one GPU, in time order.
type GPU struct {
	// Key identifies the GPU in the log: its index, else its PCI bus id,
	// else its UUID, else "#k" for the k-th row of each sampling round.
	Key   string
	Index int // -1 when the log has no index column
	BusID string
	UUID  string
	Name  string
	// Samples are sorted by time (stable, so equal times keep file order).
	Samples []Sample

	seen int // rows of this GPU read, kept or not
}

// Log is a parsed nvidia-smi CSV log.
type Log struct {
	// Columns are the canonical column names of the (first) header, in
	// file order; for a noheader log, the names inferred from the values.
	Columns []string
	// HeaderInferred is true for a noheader log.
	HeaderInferred bool
	GPUs           []*GPU
	// Rows counts data rows read (all GPUs).
	Rows int
	// Warnings are problems the reader tolerated (a truncated last line).
	Warnings []string

	// byKey indexes GPUs by Key for GPU(); built for a GPUs slice of
	// indexedLen entries starting with indexedFirst.
	byKey        map[string]int
	indexedLen   int
	indexedFirst *GPU
}

// GPU returns the GPU with the given key, or nil. It is a map lookup (a
// log may hold tens of thousands of GPUs, and renderers look each one up),
// kept right when GPUs is replaced or filtered.
func (l *Log) GPU(key string) *GPU {
	if i, ok := l.byKey[key]; ok && i < len(l.GPUs) && l.GPUs[i].Key == key {
		return l.GPUs[i]
	}
	if len(l.byKey) == len(l.GPUs) && l.indexed(len(l.GPUs)) {
		return nil // the index is current: no such GPU
	}
	l.byKey = make(map[string]int, len(l.GPUs))
	for i, g := range l.GPUs {
		if _, dup := l.byKey[g.Key]; !dup {
			l.byKey[g.Key] = i
		}
	}
	l.indexedLen = len(l.GPUs)
	if len(l.GPUs) > 0 {
		l.indexedFirst = l.GPUs[0]
	}
	if i, ok := l.byKey[key]; ok {
		return l.GPUs[i]
	}
	return nil
}

// indexed reports whether byKey was built for the current GPUs slice.
func (l *Log) indexed(n int) bool {
	return l.byKey != nil && l.indexedLen == n && (n == 0 || l.indexedFirst == l.GPUs[0])
}

// ErrNotLog is wrapped by Read errors about input that is not
// an nvidia-smi CSV at all (as opposed to a damaged one).
var ErrNotLog = errors.New("not an nvidia-smi --query-gpu CSV log")

// smiColumn is one header field: canonical name and the unit the header
// gives ("MiB", "%", or "").
type smiColumn struct {
	name string
	unit string
}

var smiFieldName = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// parseSMIHeader returns the columns if line is an nvidia-smi header. A
// header is a line whose every field is a query name, optionally followed
// by " [unit]", and that names at least one field the reader knows.
func parseSMIHeader(fields []string) ([]smiColumn, bool) {
	cols := make([]smiColumn, len(fields))
	known := false
	for i, f := range fields {
		c, ok := parseHeaderField(f, smiAliases)
		if !ok {
			return nil, false
		}
		name := c.name
		switch name {
		case ColIndex, ColTimestamp, ColBusID, ColUUID, ColMemUsed,
			ColMemTotal, ColMemFree, ColUtilGPU, ColUtilMem, ColName:
			known = true
		}
		cols[i] = c
	}
	return cols, known
}

// parseHeaderField reads one header field, "name" or "name [unit]", with
// the query's alternative spellings mapped to the name nvidia-smi prints;
// ok is false when it is no query name.
func parseHeaderField(f string, aliases map[string]string) (smiColumn, bool) {
	name, unit := f, ""
	if j := strings.IndexByte(f, '['); j >= 0 {
		if !strings.HasSuffix(f, "]") {
			return smiColumn{}, false
		}
		name, unit = strings.TrimSpace(f[:j]), strings.TrimSpace(f[j+1:len(f)-1])
	}
	name = strings.ToLower(name)
	if !smiFieldName.MatchString(name) {
		return smiColumn{}, false
	}
	if a, ok := aliases[name]; ok {
		name = a
	}
	return smiColumn{name: name, unit: unit}, true
}

// splitSMIFields splits a CSV row. nvidia-smi never quotes and separates
// with ", "; GPU names contain spaces but no commas.
func splitSMIFields(line string) []string {
	fields := strings.Split(line, ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields
}

// isSMIMissing reports whether v is one of nvidia-smi's placeholders for
// a value it could not read: "[N/A]", "[Not Supported]", "[Unknown
// Error]", "[Insufficient Permissions]", "N/A".
func isSMIMissing(v string) bool {
	if v == "" || strings.EqualFold(v, "N/A") {
		return true
	}
	return strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]")
}

var smiByteUnits = map[string]float64{
	"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// parseSMIBytes parses "1234 MiB" or "1234" (nounits; the unit is then the
// header's, and nvidia-smi reports memory in MiB when neither says).
func parseSMIBytes(v, headerUnit string) (int64, error) {
	num, unit := v, headerUnit
	if i := strings.IndexByte(v, ' '); i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i+1:])
	}
	if unit == "" {
		unit = "MiB"
	}
	mult, ok := smiByteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("unknown memory unit %q", unit)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 || float64(n) > math.MaxInt64/mult {
			return 0, fmt.Errorf("memory value %q out of range", v)
		}
		return n * int64(mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("bad memory value %q", v)
	}
	return int64(math.Round(f * mult)), nil
}

// parseSMIPercent parses "45 %" or "45".
func parseSMIPercent(v string) (float64, error) {
	num := strings.TrimSpace(strings.TrimSuffix(v, "%"))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("bad percentage %q", v)
	}
	return f, nil
}

// smiTimeLayouts: nvidia-smi prints local time without a zone; -l and -lms
// both print milliseconds, but older drivers and hand-made logs may not.
var smiTimeLayouts = []string{
	"2006/01/02 15:04:05.000",
	"2006/01/02 15:04:05",
	"2006-01-02 15:04:05.000",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
}

// TimeLayout is how reports print sample times: nvidia-smi's own layout,
// so a time in a report can be found in the log with grep.
const TimeLayout = "2006/01/02 15:04:05.000"

func parseSMITime(v string) (time.Time, error) {
	for _, l := range smiTimeLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad timestamp %q (want like 2026/11/29 17:26:22.516)", v)
}

var (
	smiUUIDValue  = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F-]+$`)
	smiBusIDValue = regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$`)
)

// inferSMIColumns names the columns of a noheader log from the values of
// its first rows. Memory columns carry " MiB" and percentages " %" unless
// nounits was also given; then there is nothing to go on.
func inferSMIColumns(rows [][]string) ([]smiColumn, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no header and no rows", ErrNotLog)
	}
	width := len(rows[0])
	cols := make([]smiColumn, width)
	var memCols, pctCols []int
	for i := 0; i < width; i++ {
		v := rows[0][i]
		switch {
		case func() bool { _, err := parseSMITime(v); return err == nil }():
			cols[i].name = ColTimestamp
		case smiUUIDValue.MatchString(v):
			cols[i].name = ColUUID
		case smiBusIDValue.MatchString(v):
			cols[i].name = ColBusID
		case strings.HasSuffix(v, " MiB"):
			memCols = append(memCols, i)
		case strings.HasSuffix(v, " %"):
			pctCols = append(pctCols, i)
		default:
			cols[i].name = fmt.Sprintf("column%d", i+1)
		}
	}
	// The first bare small integer before any memory column is the GPU
	// index: nvidia-smi users nearly always query index first.
	if width > 0 && cols[0].name == "column1" {
		if n, err := strconv.Atoi(rows[0][0]); err == nil && n >= 0 && n < 1024 {
			cols[0].name = ColIndex
		}
	}
	switch len(memCols) {
	case 0:
		return nil, fmt.Errorf("%w: no header line and no value with a MiB unit (a log written with noheader,nounits cannot be read: keep the header)", ErrNotLog)
	case 1:
		cols[memCols[0]] = smiColumn{name: ColMemUsed, unit: "MiB"}
	case 2:
		// memory.total is constant and never below memory.used.
		a, b := memCols[0], memCols[1]
		aConst, bConst := true, true
		var aMax, bMax int64
		for _, r := range rows {
			if len(r) != width {
				continue
			}
			av, _ := parseSMIBytes(r[a], "")
			bv, _ := parseSMIBytes(r[b], "")
			aConst = aConst && r[a] == rows[0][a]
			bConst = bConst && r[b] == rows[0][b]
			aMax, bMax = max(aMax, av), max(bMax, bv)
		}
		switch {
		case aConst && !bConst, aConst && bConst && aMax > bMax:
			cols[a] = smiColumn{name: ColMemTotal, unit: "MiB"}
			cols[b] = smiColumn{name: ColMemUsed, unit: "MiB"}
		case bConst && !aConst, aConst && bConst && bMax > aMax:
			cols[b] = smiColumn{name: ColMemTotal, unit: "MiB"}
			cols[a] = smiColumn{name: ColMemUsed, unit: "MiB"}
		default:
			return nil, fmt.Errorf("%w: no header line, and two memory columns that cannot be told apart (keep the header)", ErrNotLog)
		}
	default:
		return nil, fmt.Errorf("%w: no header line, and %d memory columns that cannot be told apart (keep the header)", ErrNotLog, len(memCols))
	}
	// Percentages: utilization.gpu, utilization.memory is the order every
	// nvidia-smi example uses; without a header that is all there is.
	for k, i := range pctCols {
		switch k {
		case 0:
			cols[i] = smiColumn{name: ColUtilGPU, unit: "%"}
		case 1:
			cols[i] = smiColumn{name: ColUtilMem, unit: "%"}
		default:
			cols[i] = smiColumn{name: fmt.Sprintf("column%d", i+1), unit: "%"}
		}
	}
	return cols, nil
}

// smiLayout locates the columns the reader uses within a row.
type smiLayout struct {
	width                                           int
	cols                                            []smiColumn
	index, ts, name, bus, uuid, used, total, ug, um int
}

func newSMILayout(cols []smiColumn) (*smiLayout, error) {
	l := &smiLayout{width: len(cols), cols: cols, index: -1, ts: -1, name: -1, bus: -1, uuid: -1, used: -1, total: -1, ug: -1, um: -1}
	for i, c := range cols {
		p := map[string]*int{
			ColIndex: &l.index, ColTimestamp: &l.ts, ColName: &l.name,
			ColBusID: &l.bus, ColUUID: &l.uuid, ColMemUsed: &l.used,
			ColMemTotal: &l.total, ColUtilGPU: &l.ug, ColUtilMem: &l.um,
		}[c.name]
		if p != nil && *p < 0 {
			*p = i
		}
	}
	if l.used < 0 {
		return nil, errors.New("no memory.used column: add memory.used to --query-gpu")
	}
	if l.ts < 0 {
		return nil, errors.New("no timestamp column: add timestamp to --query-gpu (needed to measure growth rates)")
	}
	return l, nil
}

// smiRow is one parsed data row before it is assigned to a GPU.
type smiRow struct {
	tsText string
	index  int
	bus    string
	uuid   string
	name   string
	sample Sample
}

func (l *smiLayout) parseRow(fields []string) (smiRow, error) {
	if len(fields) != l.width {
		return smiRow{}, fmt.Errorf("%d fields where the header has %d", len(fields), l.width)
	}
	r := smiRow{index: -1, sample: Sample{UsedBytes: -1, TotalBytes: -1, UtilGPUPct: -1, UtilMemoryPct: -1}}
	var err error
	r.tsText = fields[l.ts]
	if r.sample.Time, err = parseSMITime(fields[l.ts]); err != nil {
		return r, err
	}
	if l.index >= 0 && !isSMIMissing(fields[l.index]) {
		n, err := strconv.Atoi(fields[l.index])
		if err != nil || n < 0 {
			return r, fmt.Errorf("bad GPU index %q", fields[l.index])
		}
		r.index = n
	}
	if l.bus >= 0 {
		r.bus = fields[l.bus]
	}
	if l.uuid >= 0 {
		r.uuid = fields[l.uuid]
	}
	if l.name >= 0 {
		r.name = fields[l.name]
	}
	mem := func(col int, dst *int64) error {
		if col < 0 || isSMIMissing(fields[col]) {
			return nil
		}
		v, err := parseSMIBytes(fields[col], l.cols[col].unit)
		if err != nil {
			return fmt.Errorf("%s: %w", l.cols[col].name, err)
		}
		*dst = v
		return nil
	}
	pct := func(col int, dst *float64) error {
		if col < 0 || isSMIMissing(fields[col]) {
			return nil
		}
		v, err := parseSMIPercent(fields[col])
		if err != nil {
			return fmt.Errorf("%s: %w", l.cols[col].name, err)
		}
		*dst = v
		return nil
	}
	if err := mem(l.used, &r.sample.UsedBytes); err != nil {
		return r, err
	}
	if err := mem(l.total, &r.sample.TotalBytes); err != nil {
		return r, err
	}
	if err := pct(l.ug, &r.sample.UtilGPUPct); err != nil {
		return r, err
	}
	if err := pct(l.um, &r.sample.UtilMemoryPct); err != nil {
		return r, err
	}
	return r, nil
}

// smiMaxStride is how far a log longer than Limits.Records rows is thinned
// (every 8th row kept) before it is refused: 8 x 2M rows is 5 days of 8
// GPUs sampled every 200 ms.
const smiMaxStride = 8

func ordinalSuffix(n int) string {
	if n%100 >= 11 && n%100 <= 13 {
		return "th"
	}
	switch n % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

// smiMaxIdentity bounds what identifies one GPU (kept once per GPU):
// nvidia-smi's bus ids, UUIDs and names are a few dozen bytes each.
const smiMaxIdentity = 1024

// smiMaxLine bounds one line; nvidia-smi rows are a few hundred bytes.
const smiMaxLine = 64 << 10

// smiInferRows is how many rows of a noheader log are looked at to name
// its columns.
const smiInferRows = 256

// Read parses an nvidia-smi --query-gpu CSV log. Errors name the
// line and say what is wrong; they wrap ErrNotLog when the input does
// not look like such a log at all. A malformed last line without a final
// newline (a log cut off while nvidia-smi was writing) is dropped with a
// warning instead.
func Read(r io.Reader) (*Log, error) { return ReadLimited(r, chrometrace.Limits{}) }

// ReadLimited is Read within lim (ValueBytes, Records, Series; zero
// fields are the defaults).
func ReadLimited(r io.Reader, lim chrometrace.Limits) (*Log, error) {
	lim = lim.WithDefaults()
	lr := lines.NewReader(r, smiMaxLine, lim.ValueBytes)
	s := &smiReader{log: &Log{}, gpus: map[string]*GPU{}, stride: 1, lim: lim}
	for {
		fields, lineNo, terminated, err := nextCSVRow(lr, ErrNotLog)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if cols, ok := parseSMIHeader(fields); ok {
			if err := s.header(cols, lineNo); err != nil {
				return nil, err
			}
			continue
		}
		rl := smiRawLine{no: lineNo, fields: fields, unterminated: !terminated}
		if s.layout == nil {
			s.pending = append(s.pending, rl)
			if len(s.pending) >= smiInferRows {
				if err := s.flushPending(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := s.addRow(rl); err != nil {
			return nil, err
		}
	}
	if lr.Bytes == 0 {
		return nil, errors.New("file is empty")
	}
	if err := s.flushPending(); err != nil {
		return nil, err
	}
	return s.finish()
}

// smiRawLine is one CSV row as read.
type smiRawLine struct {
	no     int
	fields []string
	// unterminated: the line had no newline, so it is the last one
	// and may have been cut off mid-write.
	unterminated bool
}

// smiReader is the state of Read: the log so far, the columns in force,
// and the GPUs' samples, thinned to a stride past the record cap.
type smiReader struct {
	log      *Log
	layout   *smiLayout
	pending  []smiRawLine // noheader rows held back until columns are inferred
	gpus     map[string]*GPU
	order    []string
	prevTS   string
	roundPos int
	stored   int // samples kept, all GPUs
	stride   int // one row of each GPU kept in stride
	lim      chrometrace.Limits
}

// header takes a header line: the first one, or one repeated when logs
// were concatenated or nvidia-smi restarted (maybe with another query:
// then the new columns apply from here on).
func (s *smiReader) header(cols []smiColumn, lineNo int) error {
	if err := s.flushPending(); err != nil {
		return err
	}
	nl, err := newSMILayout(cols)
	if err != nil {
		return fmt.Errorf("line %d: %w: %v", lineNo, ErrNotLog, err)
	}
	if s.layout == nil {
		for _, c := range cols {
			s.log.Columns = append(s.log.Columns, c.name)
		}
	}
	s.layout = nl
	return nil
}

// gpuKey names the GPU of a row: its index, bus id or UUID, else its
// place in the sampling round.
func (s *smiReader) gpuKey(row smiRow) string {
	var key string
	switch {
	case s.layout.index >= 0 && row.index >= 0:
		key = strconv.Itoa(row.index)
	case s.layout.bus >= 0 && row.bus != "" && !isSMIMissing(row.bus):
		key = row.bus
	case s.layout.uuid >= 0 && row.uuid != "" && !isSMIMissing(row.uuid):
		key = row.uuid
	default:
		// No identity column: nvidia-smi prints every GPU of one
		// sampling round with the same timestamp, in device order.
		if row.tsText == s.prevTS {
			s.roundPos++
		} else {
			s.roundPos = 0
		}
		key = "#" + strconv.Itoa(s.roundPos)
	}
	s.prevTS = row.tsText
	return key
}

func (s *smiReader) addRow(rl smiRawLine) error {
	row, err := s.layout.parseRow(rl.fields)
	if err != nil {
		if rl.unterminated {
			s.log.Warnings = append(s.log.Warnings, fmt.Sprintf("line %d: dropped a truncated last line (%v)", rl.no, err))
			return nil
		}
		return fmt.Errorf("line %d: %w", rl.no, err)
	}
	key := s.gpuKey(row)
	if s.stored >= s.lim.Records {
		if err := s.thin(rl.no); err != nil {
			return err
		}
	}
	g := s.gpus[key]
	if g == nil {
		if len(s.gpus) >= s.lim.Series {
			return fmt.Errorf("line %d: %w", rl.no, memtimeline.SeriesError("distinct GPUs", s.lim.Series))
		}
		if len(key)+len(row.bus)+len(row.uuid)+len(row.name) > smiMaxIdentity {
			return fmt.Errorf("line %d: a GPU's index, bus id, UUID and name take more than %d bytes: not nvidia-smi's", rl.no, smiMaxIdentity)
		}
		g = &GPU{Key: key, Index: row.index, BusID: row.bus, UUID: row.uuid, Name: row.name}
		s.gpus[key] = g
		s.order = append(s.order, key)
	}
	if g.seen%s.stride == 0 {
		g.Samples = append(g.Samples, row.sample)
		s.stored++
	}
	g.seen++
	s.log.Rows++
	return nil
}

// thin keeps every other sample of each GPU and from here on every
// stride-th row: the whole log stays covered in bounded memory. Past
// smiMaxStride the log is too long to read (or a bomb).
func (s *smiReader) thin(lineNo int) error {
	if s.stride >= smiMaxStride {
		return fmt.Errorf("line %d: %w", lineNo, &chrometrace.CountLimitError{What: "nvidia-smi rows", Limit: int64(s.lim.Records) * smiMaxStride, Flag: "max-records"})
	}
	s.stride *= 2
	s.stored = 0
	for _, g := range s.gpus {
		kept := g.Samples[:0]
		for j := 0; j < len(g.Samples); j += 2 {
			kept = append(kept, g.Samples[j])
		}
		g.Samples = kept
		s.stored += len(kept)
	}
	return nil
}

// flushPending infers the columns of a log without a header from the
// rows held back, then reads them.
func (s *smiReader) flushPending() error {
	if s.layout != nil || len(s.pending) == 0 {
		return nil
	}
	rows := make([][]string, len(s.pending))
	for i, p := range s.pending {
		rows[i] = p.fields
	}
	cols, err := inferSMIColumns(rows)
	if err != nil {
		return err
	}
	if s.layout, err = newSMILayout(cols); err != nil {
		return fmt.Errorf("%w: %v", ErrNotLog, err)
	}
	s.log.HeaderInferred = true
	for _, c := range cols {
		s.log.Columns = append(s.log.Columns, c.name)
	}
	for _, p := range s.pending {
		if err := s.addRow(p); err != nil {
			return err
		}
	}
	s.pending = nil
	return nil
}

// finish checks the log read and orders its GPUs and their samples.
func (s *smiReader) finish() (*Log, error) {
	log := s.log
	if s.layout == nil {
		return nil, fmt.Errorf("%w: only blank lines", ErrNotLog)
	}
	if log.Rows == 0 {
		return nil, errors.New("header but no samples")
	}
	if s.stride > 1 {
		log.Warnings = append(log.Warnings, fmt.Sprintf("%d rows, more than the cap of %d: kept every %d%s sample of each GPU (--max-records raises the cap)", log.Rows, s.lim.Records, s.stride, ordinalSuffix(s.stride)))
	}
	for _, k := range s.order {
		g := s.gpus[k]
		sort.SliceStable(g.Samples, func(i, j int) bool { return g.Samples[i].Time.Before(g.Samples[j].Time) })
		log.GPUs = append(log.GPUs, g)
	}
	// Numeric indices in numeric order; other keys keep first appearance.
	sort.SliceStable(log.GPUs, func(i, j int) bool {
		a, b := log.GPUs[i].Index, log.GPUs[j].Index
		return a >= 0 && b >= 0 && a < b
	})
	return log, nil
}

// nextCSVRow returns the fields of the next non-blank line of an
// nvidia-smi CSV (a byte-order mark dropped, blank runs bounded), its
// number and whether it ended with a newline; io.EOF at the end. Binary
// data is an error wrapping notKind.
func nextCSVRow(lr *lines.Reader, notKind error) (fields []string, no int, terminated bool, err error) {
	for {
		text, term, err := lr.Next()
		if err == io.EOF {
			return nil, 0, false, io.EOF
		}
		no := lr.LineNo
		if err != nil {
			return nil, no, false, fmt.Errorf("line %d: %w", no, err)
		}
		if no == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		if strings.TrimSpace(text) == "" {
			if err := lr.Blank(); err != nil {
				return nil, no, false, err
			}
			continue
		}
		lr.NotBlank()
		if !lines.IsText(text) {
			return nil, no, false, fmt.Errorf("line %d: %w: binary data", no, notKind)
		}
		return splitSMIFields(text), no, term, nil
	}
}

// LooksLike reports whether head (the first bytes of a file) is an
// nvidia-smi --query-gpu CSV: its first line is a header naming
// memory.used, or (noheader) a row with a timestamp and a MiB value.
func LooksLike(head []byte) bool {
	fields, ok := firstRow(head)
	if !ok {
		return false
	}
	if cols, ok := parseSMIHeader(fields); ok {
		for _, c := range cols {
			if c.name == ColMemUsed {
				return true
			}
		}
		return false
	}
	var hasTime, hasMiB bool
	for _, f := range fields {
		if _, err := parseSMITime(f); err == nil {
			hasTime = true
		}
		hasMiB = hasMiB || strings.HasSuffix(f, " MiB")
	}
	return hasTime && hasMiB
}

// firstRow is the fields of the first non-blank line of head (a sniffed
// input's first bytes); ok is false when there is none or it is not text.
func firstRow(head []byte) ([]string, bool) {
	head = bytes.TrimPrefix(head, []byte("\ufeff"))
	for _, l := range bytes.Split(head, []byte("\n")) {
		line := strings.TrimSpace(string(l))
		if line == "" {
			continue
		}
		if !lines.IsText(line) {
			return nil, false
		}
		return splitSMIFields(line), true
	}
	return nil, false
}
