package steplog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/internal/lines"
)

// This file reads per-step memory logs: JSON Lines where a training loop
// wrote torch.cuda.memory_allocated()/memory_reserved() or a slice of
// torch.cuda.memory_stats() after every step, e.g.
//
//	{"step": 0, "t": 1795973230.88, "allocated": 207699968, "reserved": 264241152}
//
// People name these keys as they like, so the reader accepts the common
// spellings (see stepKeys) and a nested "memory_stats" object.
//
// encoding/json rather than sonic: lines are tiny, json.Number keeps byte
// counts exact, and its errors are stable across platforms (sonic falls
// back to encoding/json off amd64/arm64 anyway).

// Record is one line of a step log. Byte counts missing from the line
// are -1.
type Record struct {
	Step int64
	// Time is the line's timestamp in seconds (Unix time as time.time()
	// writes it), when HasTime.
	Time           float64
	HasTime        bool
	AllocatedBytes int64
	ReservedBytes  int64
	ActiveBytes    int64
	// Peak values since the process started (or since the last
	// reset_peak_memory_stats), when the line has them.
	PeakAllocatedBytes int64
	PeakReservedBytes  int64
	// AllocRetries is torch's num_alloc_retries so far (cudaMalloc failed,
	// the allocator gave its cache back and tried again), -1 when the line
	// has none.
	AllocRetries int64
	// InactiveSplitBytes is torch's inactive_split_bytes.all.current: free
	// blocks inside segments that also hold live ones (fragmentation the
	// cache cannot give back), -1 when the line has none.
	InactiveSplitBytes int64
	// OOMs is torch's num_ooms so far (out-of-memory errors the
	// allocator raised), -1 when the line has none.
	OOMs int64
	// HostActiveBytes and HostAllocatedBytes are pinned host memory
	// (torch.cuda.host_memory_stats(), the snippet's "host." keys): in use
	// by live tensors, and held by the caching host allocator
	// (cudaHostAlloc'd, in use or cached); -1 when the line has none.
	HostActiveBytes    int64
	HostAllocatedBytes int64
	// PrivatePoolBytes is reserved_bytes_by_private_pools summed over the
	// pools (CUDA graphs, torch.cuda.MemPool); RequestedBytes is
	// requested_bytes.all.current (what the caller asked for, without the
	// allocator's rounding: the growth model reads it when the log has it,
	// far less noise than allocated); DeviceAllocs, DeviceFrees and
	// OOMRejections are torch's num_device_alloc, num_device_free and
	// num_oom_rejections so far. -1 when the line has none.
	PrivatePoolBytes int64
	RequestedBytes   int64
	DeviceAllocs     int64
	DeviceFrees      int64
	OOMRejections    int64
	// Line is the 1-based line number in the file.
	Line int
}

// Series is the records of one device (or rank), sorted by step.
type Series struct {
	// Device is the value of the line's "device"/"rank" key; "" when the
	// log has none.
	Device  string
	Records []Record
}

// Log is a parsed step log.
type Log struct {
	Series []*Series
	// Keys found for each quantity, for the report ("allocated" ->
	// "allocated_bytes.all.current").
	Keys     map[string]string
	Lines    int
	Warnings []string
	// AllocConf is the allocator settings in the process's environment
	// (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF) as the snippet's
	// first line records them ("alloc_conf"); nil when the log does not
	// say, empty when it says none was set.
	AllocConf map[string]string
	// TotalMemoryBytes is the device's capacity and MemoryFraction the
	// process's set_per_process_memory_fraction, when a line records
	// them ("total_memory", "memory_fraction"); -1 when not.
	TotalMemoryBytes int64
	MemoryFraction   float64
	// HistoryMaxEntries is the allocator history's ring buffer size the
	// snippet asked for ("history_max_entries"), -1 when not recorded.
	HistoryMaxEntries int64
}

// LimitBytes is what the process may use: capacity times the memory
// fraction, -1 when the log does not record both.
func (l *Log) LimitBytes() int64 {
	if l == nil || l.TotalMemoryBytes <= 0 || l.MemoryFraction <= 0 {
		return -1
	}
	return int64(float64(l.TotalMemoryBytes) * min(l.MemoryFraction, 1))
}

// ErrNotLog is wrapped by Read errors about input that is not a
// step log at all.
var ErrNotLog = errors.New("not a per-step memory log (JSON Lines with allocated bytes per step)")

// stepKeys lists, per quantity, the keys accepted, in order of preference.
// A suffix _mb/_mib/_gb/_gib on a key scales its value.
var stepKeys = map[string][]string{
	"step":           {"step", "iteration", "iter", "global_step", "step_idx"},
	"time":           {"t", "time", "timestamp", "ts", "wall_time"},
	"allocated":      {"allocated", "allocated_bytes.all.current", "allocated_bytes", "memory_allocated", "mem_allocated", "alloc", "allocated_mib", "allocated_mb", "memory_allocated_mb", "allocated_gib", "allocated_gb"},
	"reserved":       {"reserved", "reserved_bytes.all.current", "reserved_bytes", "memory_reserved", "mem_reserved", "reserved_mib", "reserved_mb", "memory_reserved_mb", "reserved_gib", "reserved_gb"},
	"active":         {"active", "active_bytes.all.current", "active_bytes"},
	"peak_allocated": {"max_allocated", "peak_allocated", "allocated_bytes.all.peak", "max_memory_allocated", "max_allocated_bytes", "max_allocated_mb"},
	"peak_reserved":  {"max_reserved", "peak_reserved", "reserved_bytes.all.peak", "max_memory_reserved", "max_reserved_bytes", "max_reserved_mb"},
	"device":         {"device", "rank", "local_rank", "gpu"},
	"alloc_retries":  {"num_alloc_retries", "alloc_retries", "cuda_malloc_retries"},
	"inactive_split": {"inactive_split", "inactive_split_bytes.all.current", "inactive_split_bytes"},
	"ooms":           {"num_ooms"},
	"host_active":    {"host.active_bytes.current", "host_active_bytes", "pinned_active_bytes"},
	"host_allocated": {"host.allocated_bytes.current", "host_allocated_bytes", "pinned_bytes", "pinned_memory_bytes"},
	"requested":      {"requested_bytes.all.current", "requested_bytes"},
	"device_allocs":  {"num_device_alloc"},
	"device_frees":   {"num_device_free"},
	"oom_rejections": {"num_oom_rejections"},
}

// privatePoolPrefix starts the keys of each private pool's reserved bytes
// (reserved_bytes_by_private_pools.<pool id>.current, as the snippet
// flattens memory_stats).
const privatePoolPrefix = "reserved_bytes_by_private_pools."

// stepNested names objects whose keys count as the line's own.
var stepNested = []string{"memory_stats", "stats", "memory", "mem"}

func keyScale(key string) float64 {
	switch {
	case strings.HasSuffix(key, "_mib"), strings.HasSuffix(key, "_mb"):
		return 1 << 20
	case strings.HasSuffix(key, "_gib"), strings.HasSuffix(key, "_gb"):
		return 1 << 30
	}
	return 1
}

// lookupStepKey finds the first accepted key for quantity q in obj or its
// nested stats object.
func lookupStepKey(obj map[string]any, q string) (string, any, bool) {
	for _, k := range stepKeys[q] {
		if v, ok := obj[k]; ok && v != nil {
			return k, v, true
		}
	}
	for _, n := range stepNested {
		if inner, ok := obj[n].(map[string]any); ok {
			for _, k := range stepKeys[q] {
				if v, ok := inner[k]; ok && v != nil {
					return n + "." + k, v, true
				}
			}
		}
	}
	return "", nil, false
}

// stepBytes converts a JSON number to bytes, scaled by the key's unit.
func stepBytes(key string, v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: %v is not a number", key, v)
	}
	scale := keyScale(key)
	if n, err := strconv.ParseInt(string(num), 10, 64); err == nil && scale == 1 {
		if n < 0 {
			return 0, fmt.Errorf("%s: negative byte count %d", key, n)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	f *= scale
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f >= math.MaxInt64 {
		return 0, fmt.Errorf("%s: %s is not a byte count", key, num)
	}
	return int64(math.Round(f)), nil
}

// parseStepLine decodes one JSON object with exact numbers.
func parseStepLine(line []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("null, not a JSON object")
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	return obj, nil
}

// stepMaxDevice bounds a device name ("cuda:0"), kept once per device.
const stepMaxDevice = 256

// stepMaxLine bounds one line; a memory_stats dump is ~6 KB.
const stepMaxLine = 1 << 20

// Read parses a per-step memory log. Errors name the line; they
// wrap ErrNotLog when the input is not such a log at all. An
// unterminated malformed last line (a log cut off mid-write) is dropped
// with a warning.
func Read(r io.Reader) (*Log, error) { return ReadLimited(r, chrometrace.Limits{}) }

// ReadLimited is Read within lim (ValueBytes, Records, Series; zero
// fields are the defaults).
func ReadLimited(r io.Reader, lim chrometrace.Limits) (*Log, error) {
	lim = lim.WithDefaults()
	lr := lines.NewReader(r, stepMaxLine, lim.ValueBytes)
	log := &Log{Keys: map[string]string{}, TotalMemoryBytes: -1, MemoryFraction: -1, HistoryMaxEntries: -1}
	series := map[string]*Series{}
	var order []string
	implicitStep := int64(0)
	for {
		text, terminated, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lr.LineNo, err)
		}
		if lr.LineNo == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		text = strings.TrimSpace(text)
		if text == "" {
			if err := lr.Blank(); err != nil {
				return nil, err
			}
			continue
		}
		lr.NotBlank()
		rec, device, err := parseStepRecord(log, text)
		if err != nil {
			if !terminated && log.Lines > 0 {
				log.Warnings = append(log.Warnings, fmt.Sprintf("line %d: dropped a truncated last line (%v)", lr.LineNo, err))
				break
			}
			if log.Lines == 0 {
				return nil, fmt.Errorf("line %d: %w: %v", lr.LineNo, ErrNotLog, err)
			}
			return nil, fmt.Errorf("line %d: %w", lr.LineNo, err)
		}
		rec.Line = lr.LineNo
		if rec.Step < 0 {
			rec.Step = implicitStep
		}
		implicitStep = rec.Step + 1
		if log.Lines >= lim.Records {
			return nil, fmt.Errorf("line %d: %w", lr.LineNo, memtimeline.RecordsError("per-step records", lim.Records))
		}
		s := series[device]
		if s == nil {
			if len(series) >= lim.Series {
				return nil, fmt.Errorf("line %d: %w", lr.LineNo, memtimeline.SeriesError("distinct devices", lim.Series))
			}
			if len(device) > stepMaxDevice {
				return nil, fmt.Errorf("line %d: a device name of %d bytes (at most %d)", lr.LineNo, len(device), stepMaxDevice)
			}
			s = &Series{Device: device}
			series[device] = s
			order = append(order, device)
		}
		s.Records = append(s.Records, rec)
		log.Lines++
	}
	if lr.Bytes == 0 {
		return nil, errors.New("file is empty")
	}
	if log.Lines == 0 {
		return nil, fmt.Errorf("%w: no records", ErrNotLog)
	}
	for _, d := range order {
		s := series[d]
		sort.SliceStable(s.Records, func(i, j int) bool { return s.Records[i].Step < s.Records[j].Step })
		log.Series = append(log.Series, s)
	}
	return log, nil
}

// parseStepRecord reads one line's record; Step is -1 when the line has no
// step key (the caller numbers lines then).
func parseStepRecord(log *Log, text string) (Record, string, error) {
	rec := Record{Step: -1, AllocatedBytes: -1, ReservedBytes: -1,
		ActiveBytes: -1, PeakAllocatedBytes: -1, PeakReservedBytes: -1, AllocRetries: -1, InactiveSplitBytes: -1,
		HostActiveBytes: -1, HostAllocatedBytes: -1, PrivatePoolBytes: -1, RequestedBytes: -1, DeviceAllocs: -1, DeviceFrees: -1, OOMRejections: -1, OOMs: -1}
	if !lines.IsText(text) {
		return rec, "", errors.New("binary data")
	}
	if text[0] != '{' {
		return rec, "", errors.New("not a JSON object")
	}
	obj, err := parseStepLine([]byte(text))
	if err != nil {
		return rec, "", fmt.Errorf("bad JSON: %w", err)
	}
	key, v, ok := lookupStepKey(obj, "allocated")
	if !ok {
		return rec, "", fmt.Errorf("no allocated bytes (looked for %s)", strings.Join(stepKeys["allocated"][:4], ", "))
	}
	if rec.AllocatedBytes, err = stepBytes(key, v); err != nil {
		return rec, "", err
	}
	log.Keys["allocated"] = key
	for q, dst := range map[string]*int64{
		"reserved": &rec.ReservedBytes, "active": &rec.ActiveBytes,
		"peak_allocated": &rec.PeakAllocatedBytes, "peak_reserved": &rec.PeakReservedBytes,
		"alloc_retries": &rec.AllocRetries, "inactive_split": &rec.InactiveSplitBytes,
		"host_active": &rec.HostActiveBytes, "host_allocated": &rec.HostAllocatedBytes,
		"requested": &rec.RequestedBytes, "device_allocs": &rec.DeviceAllocs, "device_frees": &rec.DeviceFrees,
		"oom_rejections": &rec.OOMRejections, "ooms": &rec.OOMs,
	} {
		if key, v, ok := lookupStepKey(obj, q); ok {
			if *dst, err = stepBytes(key, v); err != nil {
				return rec, "", err
			}
			log.Keys[q] = key
		}
	}
	for k, v := range obj {
		if !strings.HasPrefix(k, privatePoolPrefix) || !strings.HasSuffix(k, ".current") {
			continue
		}
		b, err := stepBytes(k, v)
		if err != nil {
			return rec, "", err
		}
		rec.PrivatePoolBytes = max(rec.PrivatePoolBytes, 0) + b
		log.Keys["private_pools"] = privatePoolPrefix + "<pool>.current"
	}
	if key, v, ok := lookupStepKey(obj, "step"); ok {
		num, isNum := v.(json.Number)
		n, err := strconv.ParseInt(string(num), 10, 64)
		if !isNum || err != nil || n < 0 {
			return rec, "", fmt.Errorf("%s: %v is not a step number", key, v)
		}
		rec.Step = n
		log.Keys["step"] = key
	}
	if key, v, ok := lookupStepKey(obj, "time"); ok {
		if num, isNum := v.(json.Number); isNum {
			if f, err := num.Float64(); err == nil && !math.IsInf(f, 0) {
				rec.Time, rec.HasTime = f, true
				log.Keys["time"] = key
			}
		}
	}
	readRunFacts(log, obj)
	device := ""
	if _, v, ok := lookupStepKey(obj, "device"); ok {
		device = fmt.Sprint(v)
	}
	return rec, device, nil
}

// LooksLike reports whether head (the first bytes of a file) is a
// per-step memory log: its first line is a whole JSON object with an
// allocated-bytes key and a step key (or a second such line follows).
// A Chrome trace or a pretty-printed memory_stats.json does not qualify.
func LooksLike(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\ufeff"))
	lines := bytes.Split(head, []byte("\n"))
	objects := 0
	for i, l := range lines {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if i == len(lines)-1 && !bytes.HasSuffix(head, []byte("\n")) {
			break // possibly cut by the peek
		}
		if l[0] != '{' {
			return false
		}
		obj, err := parseStepLine(l)
		if err != nil {
			return false
		}
		if _, _, ok := lookupStepKey(obj, "allocated"); !ok {
			return false
		}
		if _, _, ok := lookupStepKey(obj, "step"); ok {
			return true
		}
		if objects++; objects >= 2 {
			return true
		}
	}
	return false
}

// maxAllocConf bounds the allocator settings kept from a line.
const maxAllocConf = 16

// readRunFacts keeps what a line says about the whole run: the allocator
// settings in the environment and the process's memory limit. Values of
// the wrong type are ignored (they are facts for the report, not steps).
func readRunFacts(log *Log, obj map[string]any) {
	if conf, ok := obj["alloc_conf"].(map[string]any); ok && log.AllocConf == nil {
		log.AllocConf = map[string]string{}
		for k, v := range conf {
			if s, ok := v.(string); ok && len(log.AllocConf) < maxAllocConf && len(k) <= 64 && len(s) <= 1024 {
				log.AllocConf[k] = s
			}
		}
	}
	if v, ok := obj["total_memory"].(json.Number); ok {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n > 0 {
			log.TotalMemoryBytes = n
		}
	}
	if v, ok := obj["history_max_entries"].(json.Number); ok {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n > 0 {
			log.HistoryMaxEntries = n
		}
	}
	if v, ok := obj["memory_fraction"].(json.Number); ok {
		if f, err := v.Float64(); err == nil && f > 0 && f <= 1 {
			log.MemoryFraction = f
		}
	}
}

// NotRecorded marks the figures that only a memory_stats() line carries
// (pinned host memory, private pools, requested bytes, device
// allocation and OOM-rejection counts) as missing: a record built from
// another source (memory_summary() tables) did not measure them.
func (r *Record) NotRecorded() {
	r.HostActiveBytes, r.HostAllocatedBytes, r.PrivatePoolBytes, r.RequestedBytes = -1, -1, -1, -1
	r.DeviceAllocs, r.DeviceFrees, r.OOMRejections = -1, -1, -1
}
