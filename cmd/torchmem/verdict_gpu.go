package main

import "github.com/torchmem/torchmem/rules"

// gpuEntries are the verdict's GPU lines: nvidia-smi split by torch's
// numbers (GPU), and who holds the memory (PROC).
func gpuEntries(g *rules.GPUAnswer) (labels, texts []string) {
	if g == nil {
		return nil, nil
	}
	if g.Split != "" {
		labels, texts = append(labels, "GPU"), append(texts, g.Split)
	}
	if g.Processes != "" {
		labels, texts = append(labels, "PROC"), append(texts, g.Processes)
	}
	return labels, texts
}
