package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

// The allocator's settings and limits, checked: what the process's
// environment asked for (the steps log's alloc_conf) against what the
// allocator says is in force (the snapshot's allocator_settings), and
// whether the snapshot's history ring buffer overflowed.

// snippetMaxEntries is TorchMemProfile's default history size: a history
// of exactly that many events filled its ring buffer.
const snippetMaxEntries = 100000

// parseAllocConf reads "key:value,key:value" (torch's syntax).
func parseAllocConf(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), ":")
		if ok && k != "" {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// settingsMismatches says each setting the environment asked for that the
// snapshot's allocator_settings do not hold.
func settingsMismatches(env map[string]string, st snapshot.AllocatorSettings) []string {
	if len(st.Recorded) == 0 {
		return nil
	}
	var out []string
	for _, name := range []string{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"} {
		conf, ok := env[name]
		if !ok {
			continue
		}
		for k, v := range parseAllocConf(conf) {
			asked := name + " " + k + ":" + v
			switch k {
			case "expandable_segments":
				want := strings.EqualFold(v, "true")
				if st.Has("expandable_segments") && st.ExpandableSegments != want {
					out = append(out, fmt.Sprintf("%s, but the snapshot says expandable_segments %v", asked, st.ExpandableSegments))
				}
			case "max_split_size_mb":
				mb, err := strconv.ParseInt(v, 10, 64)
				if err == nil && st.Has("max_split_size") && st.MaxSplitSize != mb<<20 {
					got := "unset"
					if st.MaxSplitSize >= 0 && st.MaxSplitSize < 1<<50 {
						got = fmt.Sprintf("%d MiB", st.MaxSplitSize>>20)
					}
					out = append(out, fmt.Sprintf("%s, but the snapshot says max_split_size %s", asked, got))
				}
			case "garbage_collection_threshold":
				f, err := strconv.ParseFloat(v, 64)
				if err == nil && st.Has("garbage_collection_threshold") && st.GarbageCollectionThreshold != f {
					out = append(out, fmt.Sprintf("%s, but the snapshot says garbage_collection_threshold %g", asked, st.GarbageCollectionThreshold))
				}
			}
		}
	}
	return out
}

// historyOverflow says when a snapshot's history filled its ring buffer:
// as many events as the limit the steps log records (or the snippet's
// default), with frees whose allocation is not in the history.
func historyOverflow(rep *snapshot.Report, limit int64) string {
	return historyOverflowOf(historyEvents(rep), 0, limit)
}

// orphanFrees counts the history's frees whose allocation is not in it:
// what a ring buffer that dropped its oldest events leaves (or a history
// started after those blocks were allocated).
func orphanFrees(s *snapshot.Snapshot) int64 {
	var n int64
	for _, tr := range s.DeviceTraces {
		var live snapshot.AddrMap
		for _, e := range tr.All() {
			switch e.Action {
			case snapshot.ActionAlloc:
				live.Set(e.Addr, 0)
			case snapshot.ActionFreeCompleted:
				if _, ok := live.Delete(e.Addr); !ok {
					n++
				}
			}
		}
	}
	return n
}

// historyEvents counts a snapshot's history entries.
func historyEvents(rep *snapshot.Report) int64 {
	n := int64(0)
	for _, c := range rep.TraceEntries {
		n += int64(c)
	}
	return n
}

func historyOverflowOf(n, orphans, limit int64) string {
	lim := limit
	switch {
	case lim > 0:
	case orphans > 0 && n >= 1000 && n%1000 == 0:
		// No limit recorded: a round count of events with frees whose
		// allocation is gone is a ring buffer that filled.
		lim = n
	default:
		lim = snippetMaxEntries
	}
	if n < lim {
		return ""
	}
	s := fmt.Sprintf("the snapshot's allocator history holds %d events, its max_entries", n)
	switch {
	case limit > 0:
	case lim == n && n != snippetMaxEntries:
		s = fmt.Sprintf("the snapshot's allocator history holds %d events, a round number, and %d frees whose allocation it does not hold: it reached its max_entries", n, orphans)
	default:
		s = fmt.Sprintf("the snapshot's allocator history holds %d events, TorchMemProfile's default max_entries", n)
	}
	return s + ": the ring buffer dropped its oldest events, so the history covers only the last part of the run " +
		"(a free is never dropped before its allocation, so what it shows alive was alive; what was allocated earlier is not in it, and no leak is measured from the dropped part); " +
		"raise max_entries (TORCHMEM_MAX_ENTRIES) to see more"
}

// allocSettings is the FRAG answer's settings line: settings asked for
// and not in force, and a history that overflowed.
func allocSettings(ins []*Input) string {
	f := runStepFacts(ins)
	parts := envConflicts(f)
	for _, in := range ins {
		var st *snapshot.AllocatorSettings
		var events, orphans int64
		switch {
		case in.IsDigest() && in.Digest.AllocSettings != nil:
			st, events, orphans = in.Digest.AllocSettings, in.Digest.HistoryEvents, in.Digest.HistoryOrphanFrees
		case in.Has(SourceSnapshot):
			rep := in.SnapshotReport()
			st, events, orphans = &rep.Settings, historyEvents(rep), orphanFrees(in.Snapshot)
		default:
			continue
		}
		for _, m := range settingsMismatches(f.AllocConf, *st) {
			parts = append(parts, m+": the setting asked for is not in effect (set it before the first CUDA allocation, e.g. before importing code that touches the GPU; pytorch/pytorch#183387)")
		}
		if o := historyOverflowOf(events, orphans, f.HistoryMax); o != "" {
			parts = append(parts, o)
		}
		break
	}
	return strings.Join(parts, "; ")
}

// envConflicts says where PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF
// ask for different values of one setting: only one is in effect.
func envConflicts(f StepFacts) []string {
	a, okA := f.AllocConf["PYTORCH_ALLOC_CONF"]
	c, okC := f.AllocConf["PYTORCH_CUDA_ALLOC_CONF"]
	if !okA || !okC {
		return nil
	}
	ca, cc := parseAllocConf(a), parseAllocConf(c)
	var out []string
	for k, va := range ca {
		vc, ok := cc[k]
		if !ok || strings.EqualFold(va, vc) {
			continue
		}
		s := fmt.Sprintf("PYTORCH_ALLOC_CONF asks for %s:%s and PYTORCH_CUDA_ALLOC_CONF for %s:%s: only one of them is in effect", k, va, k, vc)
		if k == "expandable_segments" && f.HasSplit && f.SplitPeak == 0 && f.MaxReserved > 0 {
			s += " (the steps log's inactive split stays 0 B at every step, as with expandable segments on)"
		}
		out = append(out, s+"; set one variable (an allocator snapshot's allocator_settings says which won)")
	}
	return out
}
