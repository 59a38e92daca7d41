package rules

// fragMinSplitBytes is the least inactive split worth weighing against
// the headroom (as frag.JudgeSnapshot's 64 MiB): fragcost.go.
const fragMinSplitBytes = 64 << 20
