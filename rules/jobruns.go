package rules

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/memtimeline"
)

// One job, one run. Under torchrun every rank is its own process, so the
// snippet's default run id before it named jobs (<host>_<pid>_<YYYYmmdd-HHMMSS>)
// differs per rank: a 4-rank job read as 4 runs, and no rank was compared
// with its peers. The ranks of one job are told apart from several runs
// in one folder by what a launcher does: one host, processes started
// within seconds of one another, each with its own rank. Such run ids are
// joined into one run, and the verdict says so.

// processRunID is the snippet's per-process run id: host, pid and launch
// time (and "-2" for a second block in the same second).
var processRunID = regexp.MustCompile(`^(.+)_(\d+)_(\d{8}-\d{6})(?:-\d+)?$`)

// jobLaunchWindow is how far apart the ranks of one job may start.
const jobLaunchWindow = 10 * time.Second

// jobRun is one process run id of a folder, with the ranks it wrote.
type jobRun struct {
	id    string
	host  string
	pid   string
	at    time.Time
	ranks map[int64]bool
}

// joinJobRuns maps each process run id of one folder that belongs to a
// multi-rank job to the job's run (the id of its lowest rank), and says
// which ids each job joined. runs lists the folder's run ids with the
// ranks each wrote.
func joinJobRuns(runs map[string]map[int64]bool) (to map[string]string, joined map[string][]string) {
	var cands []jobRun
	for id, ranks := range runs {
		m := processRunID.FindStringSubmatch(id)
		if m == nil {
			continue
		}
		at, err := time.Parse("20060102-150405", m[3])
		if err != nil {
			continue
		}
		cands = append(cands, jobRun{id: id, host: m[1], pid: m[2], at: at, ranks: ranks})
	}
	slices.SortFunc(cands, func(a, b jobRun) int {
		return cmp.Or(strings.Compare(a.host, b.host), a.at.Compare(b.at), strings.Compare(a.id, b.id))
	})
	to, joined = map[string]string{}, map[string][]string{}
	for i := 0; i < len(cands); {
		j := i + 1
		for j < len(cands) && cands[j].host == cands[i].host && cands[j].at.Sub(cands[i].at) <= jobLaunchWindow {
			j++
		}
		cluster := cands[i:j]
		i = j
		if len(cluster) < 2 {
			continue
		}
		// Each process one rank, no rank twice: else these are separate
		// runs that happened to start together (a sweep).
		seen := map[int64]bool{}
		ok := true
		for _, c := range cluster {
			if len(c.ranks) != 1 {
				ok = false
				break
			}
			for r := range c.ranks {
				ok = ok && r >= 0 && !seen[r]
				seen[r] = true
			}
		}
		if !ok {
			continue
		}
		lowest := slices.MinFunc(cluster, func(a, b jobRun) int { return cmp.Compare(rankOfRun(a), rankOfRun(b)) })
		var ids []string
		for _, c := range cluster {
			to[c.id] = lowest.id
			ids = append(ids, c.id)
		}
		slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(rankOf(runs[a]), rankOf(runs[b])) })
		joined[lowest.id] = ids
	}
	return to, joined
}

func rankOfRun(r jobRun) int64 { return rankOf(r.ranks) }

// rankOf is the one rank of a set.
func rankOf(ranks map[int64]bool) int64 {
	for r := range ranks {
		return r
	}
	return -1
}

// joinedNote says which process run ids were read as one job.
func joinedNote(ids []string) string {
	if len(ids) < 2 {
		return ""
	}
	span := ""
	var first, last time.Time
	for i, id := range ids {
		if m := processRunID.FindStringSubmatch(id); m != nil {
			if at, err := time.Parse("20060102-150405", m[3]); err == nil {
				if i == 0 || at.Before(first) {
					first = at
				}
				if i == 0 || at.After(last) {
					last = at
				}
			}
		}
	}
	if !first.IsZero() {
		span = fmt.Sprintf(" launched within %s on one host", memtimeline.FormatDuration(max(last.Sub(first), time.Second)))
	}
	return fmt.Sprintf("one job of %d ranks: %d process run ids%s, one rank each (%s), read as one run", len(ids), len(ids), span, more.Join(ids, 4, ", "))
}
