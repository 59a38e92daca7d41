package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// JSON snapshots. Some devices' on-demand path writes the allocator
// snapshot as JSON (json.dump of torch.cuda.memory._snapshot()): the same
// dict as the pickle, the same keys. It reads into the same model, every
// field optional as in the pickle. encoding/json: the fields are typed
// here, numbers kept exact (json.Number), and LimitInput (the caller's)
// bounds the bytes.

type jsonFrame struct {
	Filename string      `json:"filename"`
	Line     json.Number `json:"line"`
	Name     string      `json:"name"`
}

type jsonBlock struct {
	Address       *uint64     `json:"address"`
	Size          int64       `json:"size"`
	RequestedSize *int64      `json:"requested_size"`
	State         string      `json:"state"`
	Frames        []jsonFrame `json:"frames"`
}

type jsonSegment struct {
	Device        int         `json:"device"`
	Address       uint64      `json:"address"`
	TotalSize     int64       `json:"total_size"`
	AllocatedSize int64       `json:"allocated_size"`
	ActiveSize    int64       `json:"active_size"`
	RequestedSize int64       `json:"requested_size"`
	Stream        int64       `json:"stream"`
	SegmentType   string      `json:"segment_type"`
	PoolID        []int64     `json:"segment_pool_id"`
	IsExpandable  bool        `json:"is_expandable"`
	Frames        []jsonFrame `json:"frames"`
	Blocks        []jsonBlock `json:"blocks"`
}

type jsonEntry struct {
	Action         string      `json:"action"`
	Addr           uint64      `json:"addr"`
	Size           int64       `json:"size"`
	Stream         int64       `json:"stream"`
	TimeUS         int64       `json:"time_us"`
	DeviceFree     int64       `json:"device_free"`
	Frames         []jsonFrame `json:"frames"`
	CompileContext string      `json:"compile_context"`
	UserMetadata   string      `json:"user_metadata"`
}

type jsonAnnotation struct {
	Stage  string `json:"stage"`
	Name   string `json:"name"`
	Device int    `json:"device"`
	TimeUS int64  `json:"time_us"`
}

type jsonSnapshot struct {
	Segments            *[]jsonSegment             `json:"segments"`
	DeviceTraces        *[][]jsonEntry             `json:"device_traces"`
	AllocatorSettings   map[string]json.RawMessage `json:"allocator_settings"`
	ExternalAnnotations []jsonAnnotation           `json:"external_annotations"`
}

// LooksLikeJSON is the loader's content test for a JSON snapshot: an
// object whose first key is one a snapshot has ("segments",
// "device_traces"), as json.dump writes torch's dict.
func LooksLikeJSON(head []byte) bool {
	h := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(h) == 0 || h[0] != '{' {
		return false
	}
	h = bytes.TrimLeft(h[1:], " \t\r\n")
	return bytes.HasPrefix(h, []byte(`"segments"`)) || bytes.HasPrefix(h, []byte(`"device_traces"`))
}

// ReadJSON decodes a JSON allocator snapshot from r into the model Read
// gives for a pickle.
func ReadJSON(r io.Reader) (*Snapshot, error) {
	dec := json.NewDecoder(r)
	var js jsonSnapshot
	if err := dec.Decode(&js); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("not a JSON allocator snapshot: %v at byte %d", err, se.Offset)
		case errors.As(err, &te):
			return nil, fmt.Errorf("not a JSON allocator snapshot: %s is a JSON %s, want %v", te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("not a JSON allocator snapshot: %w", err)
	}
	if js.Segments == nil && js.DeviceTraces == nil {
		return nil, errors.New("not an allocator snapshot: a JSON object without segments or device_traces")
	}
	s := &Snapshot{}
	frames := func(fs []jsonFrame) []Frame {
		if len(fs) == 0 {
			return nil
		}
		out := make([]Frame, len(fs))
		for i, f := range fs {
			out[i] = Frame{Filename: f.Filename, Name: f.Name}
			if n, err := strconv.ParseInt(string(f.Line), 10, 64); err == nil && n > 0 && n <= math.MaxInt32 {
				out[i].Line = int(n) // (size_t)-1 and the like: no line
			}
		}
		return out
	}
	if js.Segments != nil {
		for _, js := range *js.Segments {
			seg := Segment{Device: js.Device, Address: js.Address, TotalSize: js.TotalSize, AllocatedSize: js.AllocatedSize,
				ActiveSize: js.ActiveSize, RequestedSize: js.RequestedSize, Stream: js.Stream, SegmentType: js.SegmentType,
				IsExpandable: js.IsExpandable, Frames: frames(js.Frames)}
			for i := 0; i < len(js.PoolID) && i < 2; i++ {
				seg.PoolID[i] = js.PoolID[i]
			}
			next := js.Address
			for _, jb := range js.Blocks {
				b := Block{Address: next, Size: jb.Size, State: jb.State, Frames: frames(jb.Frames)}
				if jb.Address != nil {
					b.Address = *jb.Address
				}
				if jb.RequestedSize != nil {
					b.RequestedSize = *jb.RequestedSize
				} else {
					b.RequestedSize, b.NoRequested = b.Size, true
				}
				next = b.Address + uint64(max(b.Size, 0))
				seg.Blocks = append(seg.Blocks, b)
			}
			s.Segments = append(s.Segments, seg)
		}
	}
	if js.DeviceTraces != nil {
		contexts := map[EntryContext]*EntryContext{}
		hb := newHistoryBuilder(&history{})
		for d, tr := range *js.DeviceTraces {
			if len(tr) > maxHistoryEntries-hb.h.n {
				return nil, historyTooLong(d, len(tr), hb.h.n)
			}
			out := make([]TraceEntry, len(tr))
			for i, e := range tr {
				out[i] = TraceEntry{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: e.Stream, TimeUS: e.TimeUS, DeviceFree: e.DeviceFree, Frames: frames(e.Frames)}
				if c := (EntryContext{CompileContext: e.CompileContext, UserMetadata: e.UserMetadata}); c != (EntryContext{}) {
					p, ok := contexts[c]
					if !ok {
						p = &c
						contexts[c] = p
					}
					out[i].Context = p
				}
			}
			s.DeviceTraces = append(s.DeviceTraces, hb.trace(out))
		}
	}
	for _, a := range js.ExternalAnnotations {
		s.ExternalAnnotations = append(s.ExternalAnnotations, Annotation(a))
	}
	s.AllocatorSettings = jsonSettings(js.AllocatorSettings)
	return s, nil
}

// jsonSettings reads allocator_settings as the pickle reader does.
func jsonSettings(m map[string]json.RawMessage) AllocatorSettings {
	var s AllocatorSettings
	if m == nil {
		return s
	}
	s.Recorded = []string{}
	for k, raw := range m {
		s.Recorded = append(s.Recorded, k)
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if d.Decode(&v) != nil {
			continue
		}
		num := func() int64 {
			if n, ok := v.(json.Number); ok {
				i, _ := n.Int64()
				return i
			}
			if b, ok := v.(bool); ok && b {
				return 1
			}
			return 0
		}
		switch k {
		case "PYTORCH_CUDA_ALLOC_CONF":
			s.AllocConf, _ = v.(string)
		case "max_split_size":
			s.MaxSplitSize = num()
		case "expandable_segments":
			s.ExpandableSegments = num() != 0
		case "garbage_collection_threshold":
			if n, ok := v.(json.Number); ok {
				s.GarbageCollectionThreshold, _ = n.Float64()
			}
		case "roundup_power2_divisions":
			if dm, ok := v.(map[string]any); ok {
				s.RoundupPower2Divisions = map[string]int64{}
				for dk, dv := range dm {
					if n, ok := dv.(json.Number); ok {
						s.RoundupPower2Divisions[dk], _ = n.Int64()
					}
				}
			}
		default:
			if s.Other == nil {
				s.Other = map[string]string{}
			}
			switch t := v.(type) {
			case bool:
				s.Other[k] = map[bool]string{true: "True", false: "False"}[t]
			case nil:
				s.Other[k] = "None"
			default:
				s.Other[k] = fmt.Sprint(t)
			}
		}
	}
	slices.Sort(s.Recorded)
	return s
}
