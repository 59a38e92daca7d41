package smi

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/internal/lines"
)

// This file reads the CSV that `nvidia-smi --query-compute-apps=...
// --format=csv` prints: one row per process holding memory on a GPU, once
// or in a loop (-lms). The header is needed (its field names are what
// tell this log from a --query-gpu one); columns may come in any order,
// with or without units. Without a timestamp column the rows of one
// sampling round are told apart from the next by a process repeating.

// Compute-apps column names as nvidia-smi prints them in the header.
const (
	AppColPID     = "pid"
	AppColName    = "process_name"
	AppColUsed    = "used_gpu_memory" // --query-compute-apps=used_memory prints this
	AppColGPUUUID = "gpu_uuid"
	AppColBusID   = "gpu_bus_id"
	AppColGPUName = "gpu_name"
)

var appAliases = map[string]string{
	"used_memory": AppColUsed,
	"name":        AppColName,
	"uuid":        AppColGPUUUID,
	"pci.bus_id":  AppColBusID,
}

// AppSample is one row: a process's memory on one GPU at one time.
type AppSample struct {
	// Time is the row's timestamp; zero without a timestamp column.
	Time time.Time
	// Round is the sampling round the row belongs to (0-based).
	Round int
	// UsedBytes is -1 when nvidia-smi could not read it ("[N/A]", as in
	// some containers and on WSL).
	UsedBytes int64
}

// Process is one process on one GPU, with its samples in time order.
type Process struct {
	PID  int64
	Name string
	// GPU is the GPU's UUID, else its bus id, "" when the log names
	// neither (one GPU, or the user did not ask).
	GPU      string
	GPUUUID  string
	GPUBusID string
	Samples  []AppSample
}

// AppsLog is a parsed --query-compute-apps log.
type AppsLog struct {
	Columns []string
	// HasTime: the log has a timestamp column.
	HasTime bool
	// Rounds is how many sampling rounds the log holds (1 for one
	// snapshot); RoundTimes their times, when HasTime.
	Rounds     int
	RoundTimes []time.Time
	Processes  []*Process
	Rows       int
	Warnings   []string
}

// ErrNotAppsLog is wrapped by ReadApps errors about input that is not a
// compute-apps CSV at all.
var ErrNotAppsLog = errors.New("not an nvidia-smi --query-compute-apps CSV log")

// parseAppsHeader returns the canonical column names and units if fields
// are a compute-apps header: every field a query name (with an optional
// " [unit]"), pid and the used memory among them.
func parseAppsHeader(fields []string) ([]smiColumn, bool) {
	cols := make([]smiColumn, len(fields))
	var pid, used bool
	for i, f := range fields {
		c, ok := parseHeaderField(f, appAliases)
		if !ok {
			return nil, false
		}
		pid = pid || c.name == AppColPID
		used = used || c.name == AppColUsed
		cols[i] = c
	}
	return cols, pid && used
}

// LooksLikeApps reports whether head is a --query-compute-apps CSV: its
// first non-blank line is a header naming pid and the used memory.
func LooksLikeApps(head []byte) bool {
	fields, ok := firstRow(head)
	if !ok {
		return false
	}
	_, ok = parseAppsHeader(fields)
	return ok
}

type appsLayout struct {
	width                          int
	cols                           []smiColumn
	ts, pid, name, used, uuid, bus int
}

func newAppsLayout(cols []smiColumn) *appsLayout {
	l := &appsLayout{width: len(cols), cols: cols, ts: -1, pid: -1, name: -1, used: -1, uuid: -1, bus: -1}
	for i, c := range cols {
		p := map[string]*int{ColTimestamp: &l.ts, AppColPID: &l.pid, AppColName: &l.name,
			AppColUsed: &l.used, AppColGPUUUID: &l.uuid, AppColBusID: &l.bus}[c.name]
		if p != nil && *p < 0 {
			*p = i
		}
	}
	return l
}

// appsMaxProcesses bounds the distinct (pid, GPU) pairs kept.
const appsMaxProcesses = 1 << 16

// ReadApps parses an nvidia-smi --query-compute-apps CSV log. Errors name
// the line; they wrap ErrNotAppsLog when the input is not such a log. A
// malformed last line without a newline (cut off mid-write) is dropped
// with a warning.
func ReadApps(r io.Reader) (*AppsLog, error) { return ReadAppsLimited(r, chrometrace.Limits{}) }

// ReadAppsLimited is ReadApps within lim (ValueBytes, Records; zero
// fields are the defaults).
func ReadAppsLimited(r io.Reader, lim chrometrace.Limits) (*AppsLog, error) {
	lim = lim.WithDefaults()
	lr := lines.NewReader(r, smiMaxLine, lim.ValueBytes)
	log := &AppsLog{}
	var layout *appsLayout
	procs := map[string]*Process{}
	var order []string
	seenInRound := map[string]bool{}
	var prevTS string
	round := -1
	newRound := func(t time.Time) {
		round++
		clear(seenInRound)
		if log.HasTime {
			log.RoundTimes = append(log.RoundTimes, t)
		}
	}
	for {
		fields, no, terminated, err := nextCSVRow(lr, ErrNotAppsLog)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if cols, ok := parseAppsHeader(fields); ok {
			nl := newAppsLayout(cols)
			if layout == nil {
				for _, c := range cols {
					log.Columns = append(log.Columns, c.name)
				}
				log.HasTime = nl.ts >= 0
			} else if (nl.ts >= 0) != log.HasTime {
				return nil, fmt.Errorf("line %d: a header with%s a timestamp after one with%s", no, map[bool]string{true: "", false: "out"}[nl.ts >= 0], map[bool]string{true: "", false: "out"}[log.HasTime])
			}
			layout = nl
			continue
		}
		if layout == nil {
			return nil, fmt.Errorf("line %d: %w: no header line (pid, process_name, used_gpu_memory [MiB], ...): keep the header", no, ErrNotAppsLog)
		}
		if len(fields) == 1 && strings.HasPrefix(strings.ToLower(fields[0]), "no running") {
			continue // "No running processes found" from a plain-text query
		}
		bad := func(err error) error {
			if !terminated {
				log.Warnings = append(log.Warnings, fmt.Sprintf("line %d: dropped a truncated last line (%v)", no, err))
				return nil
			}
			return fmt.Errorf("line %d: %w", no, err)
		}
		if len(fields) > layout.width && layout.name >= 0 {
			// A process name with commas in it (nvidia-smi does not quote).
			extra := len(fields) - layout.width
			joined := strings.Join(fields[layout.name:layout.name+extra+1], ",")
			fields = append(append(fields[:layout.name:layout.name], joined), fields[layout.name+extra+1:]...)
		}
		if len(fields) != layout.width {
			if err := bad(fmt.Errorf("%d fields where the header has %d", len(fields), layout.width)); err != nil {
				return nil, err
			}
			continue
		}
		pid, err := strconv.ParseInt(fields[layout.pid], 10, 64)
		if err != nil || pid < 0 {
			if err := bad(fmt.Errorf("bad pid %q", fields[layout.pid])); err != nil {
				return nil, err
			}
			continue
		}
		s := AppSample{UsedBytes: -1}
		if !isSMIMissing(fields[layout.used]) {
			if s.UsedBytes, err = parseSMIBytes(fields[layout.used], layout.cols[layout.used].unit); err != nil {
				if err := bad(fmt.Errorf("%s: %w", AppColUsed, err)); err != nil {
					return nil, err
				}
				continue
			}
		}
		var tsText string
		if layout.ts >= 0 {
			tsText = fields[layout.ts]
			if s.Time, err = parseSMITime(tsText); err != nil {
				if err := bad(err); err != nil {
					return nil, err
				}
				continue
			}
		}
		var uuid, bus, name string
		if layout.uuid >= 0 && !isSMIMissing(fields[layout.uuid]) {
			uuid = fields[layout.uuid]
		}
		if layout.bus >= 0 && !isSMIMissing(fields[layout.bus]) {
			bus = fields[layout.bus]
		}
		if layout.name >= 0 {
			name = fields[layout.name]
		}
		gpu := uuid
		if gpu == "" {
			gpu = bus
		}
		if len(name)+len(uuid)+len(bus) > smiMaxIdentity {
			return nil, fmt.Errorf("line %d: a process's name and GPU take more than %d bytes: not nvidia-smi's", no, smiMaxIdentity)
		}
		key := strconv.FormatInt(pid, 10) + "\x00" + gpu
		// A new round: a new timestamp, or (without timestamps) a process
		// seen again.
		switch {
		case round < 0:
			newRound(s.Time)
		case log.HasTime && tsText != prevTS:
			newRound(s.Time)
		case !log.HasTime && seenInRound[key]:
			newRound(s.Time)
		}
		prevTS = tsText
		seenInRound[key] = true
		s.Round = round
		p := procs[key]
		if p == nil {
			if len(procs) >= appsMaxProcesses {
				return nil, fmt.Errorf("line %d: %w", no, memtimeline.SeriesError("distinct processes", appsMaxProcesses))
			}
			p = &Process{PID: pid, Name: name, GPU: gpu, GPUUUID: uuid, GPUBusID: bus}
			procs[key] = p
			order = append(order, key)
		}
		if log.Rows >= lim.Records {
			return nil, fmt.Errorf("line %d: %w", no, memtimeline.RecordsError("nvidia-smi compute-apps rows", lim.Records))
		}
		p.Samples = append(p.Samples, s)
		log.Rows++
	}
	if lr.Bytes == 0 {
		return nil, errors.New("file is empty")
	}
	if layout == nil {
		return nil, fmt.Errorf("%w: only blank lines", ErrNotAppsLog)
	}
	log.Rounds = round + 1
	for _, k := range order {
		p := procs[k]
		sort.SliceStable(p.Samples, func(i, j int) bool { return p.Samples[i].Time.Before(p.Samples[j].Time) })
		log.Processes = append(log.Processes, p)
	}
	return log, nil
}
