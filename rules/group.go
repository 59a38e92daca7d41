package rules

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/torchmem/torchmem/rules/leak"
)

// One run and rank is usually seen through several files: the snippet
// writes a trace per profiled cycle, an allocator snapshot and a step log
// per rank (<host>_rank<r>_step<n>.pt.trace.json.gz, <host>_rank<r>.snapshot.pickle,
// <host>_rank<r>.steps.jsonl); recordings put trace.json.gz, snapshot.pickle
// and stats_steps.jsonl in one folder per rank. Grouping them gives one
// verdict per run and rank instead of one per file.

// snippetName matches the snippet's file names: the run (host) and rank.
var snippetName = regexp.MustCompile(`^(.+?)_rank(\d+)(?:_step\d+)?\.`)

// runGroup is the inputs of one run and rank.
type runGroup struct {
	Name   string
	Run    string
	Rank   int64
	Inputs []*Input
	// Joined lists the process run ids read as this one job's (older
	// snippets named each rank's files by its own process), rank order.
	Joined []string
}

type groupKey struct {
	dir, run string
	rank     int64
}

// groupInputs groups inputs by run and rank, in the order they came. Files
// named by the snippet group by folder, host and rank; other files (saved
// by hand: trace.json.gz, memory_timeline.json.gz, stats_steps.jsonl) are
// one run per folder, grouped by rank (from a trace's distributedInfo or a
// "rank<N>" in the name or folder); one of unknown rank joins the folder's
// only rank.
func groupInputs(ins []*Input) []runGroup {
	keyOf := make([]groupKey, len(ins))
	for i, in := range ins {
		dir := groupDir(in.Source)
		base := filepath.Base(in.Source)
		k := groupKey{dir: dir, rank: in.rankOrContents()}
		if m := snippetName.FindStringSubmatch(base); m != nil {
			k.run = m[1]
			if k.rank < 0 {
				fmt.Sscan(m[2], &k.rank)
			}
		} else {
			k.run = "\x00" // not the snippet's: one run per folder
		}
		keyOf[i] = k
	}
	// The ranks of one job under older snippets' per-process run ids are
	// one run (jobruns.go).
	runRanks := map[string]map[string]map[int64]bool{}
	for _, k := range keyOf {
		if k.run == "\x00" {
			continue
		}
		if runRanks[k.dir] == nil {
			runRanks[k.dir] = map[string]map[int64]bool{}
		}
		if runRanks[k.dir][k.run] == nil {
			runRanks[k.dir][k.run] = map[int64]bool{}
		}
		runRanks[k.dir][k.run][k.rank] = true
	}
	joinedRuns := map[[2]string][]string{}
	for dir, runs := range runRanks {
		to, joined := joinJobRuns(runs)
		if len(to) == 0 {
			continue
		}
		for i := range keyOf {
			if t, ok := to[keyOf[i].run]; ok && keyOf[i].dir == dir {
				keyOf[i].run = t
			}
		}
		for run, ids := range joined {
			joinedRuns[[2]string{dir, run}] = ids
		}
	}
	// A file not named by the snippet (a training log with
	// memory_summary() tables, nvidia-smi) beside the snippet's files of
	// one run joins that run when the rank fits.
	// Indexed by directory and by directory and rank, so that thousands of
	// ranks group in linear time.
	type dirRank struct {
		dir  string
		rank int64
	}
	snippetRuns := map[string][]groupKey{}
	runsOfRank := map[dirRank][]groupKey{}
	seenRun := map[groupKey]bool{}
	for _, k := range keyOf {
		if k.run != "\x00" && !seenRun[k] {
			seenRun[k] = true
			snippetRuns[k.dir] = append(snippetRuns[k.dir], k)
			runsOfRank[dirRank{k.dir, k.rank}] = append(runsOfRank[dirRank{k.dir, k.rank}], k)
		}
	}
	for i, in := range ins {
		k := keyOf[i]
		if k.run != "\x00" {
			continue
		}
		fits := runsOfRank[dirRank{k.dir, k.rank}]
		if k.rank < 0 {
			fits = snippetRuns[k.dir]
		}
		if len(fits) == 1 && !in.Has(SourceTrace) && !in.Has(SourceSnapshot) {
			keyOf[i] = fits[0]
			continue
		}
	}
	// A file of unknown rank in a folder whose other files are of one rank
	// is that rank's (a memory timeline beside rank 0's trace).
	ranksIn := map[string]map[int64]bool{}
	for i := range ins {
		if k := keyOf[i]; k.run == "\x00" && k.rank >= 0 {
			if ranksIn[k.dir] == nil {
				ranksIn[k.dir] = map[int64]bool{}
			}
			ranksIn[k.dir][k.rank] = true
		}
	}
	for i := range ins {
		if k := keyOf[i]; k.run == "\x00" && k.rank < 0 && len(ranksIn[k.dir]) == 1 {
			for r := range ranksIn[k.dir] {
				keyOf[i].rank = r
			}
		}
	}
	var out []runGroup
	index := map[groupKey]int{}
	for i, in := range ins {
		k := keyOf[i]
		if j, ok := index[k]; ok {
			out[j].Inputs = append(out[j].Inputs, in)
			continue
		}
		index[k] = len(out)
		g := runGroup{Rank: k.rank, Inputs: []*Input{in}}
		if k.run != "\x00" {
			g.Run = k.run
			g.Joined = joinedRuns[[2]string{k.dir, k.run}]
		}
		out = append(out, g)
	}
	// Names: "rank 1 (vm, dir)" for a group, the file for a lone input.
	ranks := map[int64]int{}
	for _, g := range out {
		ranks[g.Rank]++
	}
	for i := range out {
		g := &out[i]
		if len(g.Inputs) == 1 && g.Rank < 0 {
			g.Name = g.Inputs[0].Source
			continue
		}
		var parts []string
		if g.Rank >= 0 {
			parts = append(parts, fmt.Sprintf("rank %d", g.Rank))
		}
		where := groupDir(g.Inputs[0].Source)
		if g.Run != "" {
			where = filepath.Join(where, g.Run)
		}
		if len(parts) == 0 {
			g.Name = where
		} else {
			g.Name = parts[0] + " (" + where + ")"
		}
	}
	return out
}

// judgeAll groups the inputs and judges each group with the built-in
// rules' thresholds.
func judgeAll(ins []*Input) []Verdict { return judgeAllWith(ins, DefaultJudgeOptions()) }

// judgeAllWith groups the inputs and judges each group with o.
func judgeAllWith(ins []*Input, o JudgeOptions) []Verdict {
	var out []Verdict
	for _, g := range groupInputs(ins) {
		v := judgeWith(g.Name, g.Inputs, o)
		v.Run = g.Run
		v.Job = joinedNote(g.Joined)
		if g.Rank >= 0 {
			v.Rank = g.Rank
		}
		out = append(out, v)
	}
	return out
}

// leakRules are the rules that report growth step over step, one per
// kind of input.
var leakRules = []string{"memory.leak", "snapshot.leak", "steps.growth", "smi.leak"}

// IsLeakRule reports whether a rule id is one of the leak rules.
func IsLeakRule(id string) bool { return slices.Contains(leakRules, id) }

// mergeLeakFindings turns the leak findings of each group's inputs (a
// trace's, a snapshot's, a step log's: one leak seen three ways) into one
// finding per group carrying the verdict's figure, holding line and every
// source's number. Other findings pass through. A group whose inputs gave
// at most one leak finding keeps it as it is.
func mergeLeakFindings(vs []Verdict, fs []Finding) []Finding {
	groupOf := map[string]int{}
	for i, v := range vs {
		for _, s := range v.Sources {
			groupOf[s] = i
		}
	}
	perGroup := map[int][]int{}
	for i, f := range fs {
		if !IsLeakRule(f.Rule) {
			continue
		}
		if g, ok := groupOf[f.Source]; ok {
			perGroup[g] = append(perGroup[g], i)
		}
	}
	drop := map[int]bool{}
	merged := map[int]Finding{} // index of the kept finding -> merged finding
	for g, idx := range perGroup {
		if len(idx) < 2 {
			continue
		}
		v := vs[g]
		keep := idx[0]
		for _, i := range idx {
			// Keep the finding with the holding line, else the most severe.
			if fs[i].Severity > fs[keep].Severity || (fs[i].Severity == fs[keep].Severity && fs[i].Location != nil && fs[keep].Location == nil) {
				keep = i
			}
		}
		f := fs[keep]
		for _, i := range idx {
			f.Severity = max(f.Severity, fs[i].Severity)
			if i != keep {
				drop[i] = true
			}
		}
		l := v.Leak
		if l.Verdict == leak.VerdictLeak {
			where := ""
			if l.Location != nil {
				where = " allocated at " + l.Location.String()
				if l.Location.Function != "" {
					where += " (" + l.Location.Function + ")"
				}
			}
			kind := ""
			if l.Kind != "" {
				kind = " (" + l.Kind + ")"
			}
			f.Title = fmt.Sprintf("Leak%s: %s%s", kind, l.Figure(), where)
			files := map[string]bool{}
			for _, i := range idx {
				files[fs[i].Source] = true
			}
			f.Detail = fmt.Sprintf("One leak seen in %d files of %s; the figure is from %s. %s", len(files), v.Name, l.From, l.Agreement)
			if l.Settle != "" {
				f.Detail += ". To settle it: " + l.Settle + "."
			}
			if l.Fix != "" {
				f.Advice = l.Fix
			}
			if l.Location != nil {
				f.Location = l.Location
			}
			if f.Metrics == nil {
				f.Metrics = map[string]float64{}
			} else {
				f.Metrics = maps.Clone(f.Metrics)
			}
			f.Metrics["bytes_per_step"] = float64(l.BytesPerStep)
			for _, e := range l.Evidence {
				f.Metrics[string(e.Kind)+"_bytes_per_step"] = float64(e.BytesPerStep)
			}
		}
		merged[keep] = f
	}
	var out []Finding
	for i, f := range fs {
		if drop[i] {
			continue
		}
		if m, ok := merged[i]; ok {
			f = m
		}
		out = append(out, f)
	}
	return out
}
