package smi

import (
	"encoding/json"
	"math"
	"time"
)

// JSON of the per-process analysis. nvidia-smi prints local time without
// a zone, so its times are written as it printed them (TimeLayout), never
// as UTC they may not be.

func smiTimeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(TimeLayout)
}

// growthJSON is a growth run as JSON.
type growthJSON struct {
	Start        string  `json:"start"`
	End          string  `json:"end"`
	DurationS    float64 `json:"duration_s"`
	StartBytes   int64   `json:"start_bytes"`
	EndBytes     int64   `json:"end_bytes"`
	GrowthBytes  int64   `json:"growth_bytes"`
	Rises        int     `json:"new_highs"`
	SlopeMiBPerS float64 `json:"slope_mib_per_s"`
	R2           float64 `json:"r2"`
	Reason       string  `json:"reason"`
}

func growthOf(r *GrowthRun) *growthJSON {
	if r == nil {
		return nil
	}
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	return &growthJSON{Start: smiTimeText(r.Start), End: smiTimeText(r.End), DurationS: round(r.Duration.Seconds()),
		StartBytes: r.StartBytes, EndBytes: r.EndBytes, GrowthBytes: r.GrowthBytes, Rises: r.Rises,
		SlopeMiBPerS: round(r.SlopeBytesPerSec / (1 << 20)), R2: round(r.R2), Reason: r.Reason}
}

// MarshalJSON writes the times as nvidia-smi printed them and the growth
// runs in the smi command's shape.
func (p ProcessReport) MarshalJSON() ([]byte, error) {
	type plain ProcessReport
	return json.Marshal(struct {
		plain
		First        string      `json:"first"`
		Last         string      `json:"last"`
		ZombieSince  string      `json:"zombie_since,omitempty"`
		Grows        *growthJSON `json:"grows,omitempty"`
		StillGrowing *growthJSON `json:"still_growing,omitempty"`
	}{plain(p), smiTimeText(p.First), smiTimeText(p.Last), smiTimeText(p.ZombieSince), growthOf(p.Grows), growthOf(p.StillGrowing)})
}

// MarshalJSON writes the stretch's times as nvidia-smi printed them.
func (s Sharing) MarshalJSON() ([]byte, error) {
	type plain Sharing
	return json.Marshal(struct {
		plain
		Start string `json:"start"`
		End   string `json:"end"`
	}{plain(s), smiTimeText(s.Start), smiTimeText(s.End)})
}
