package report

import (
	"path/filepath"
	"testing"
)

func TestSARIFURI(t *testing.T) {
	root := filepath.FromSlash("/home/me/repo")
	cases := []struct {
		path, want string
		ok         bool
	}{
		{"/home/me/repo/train.py", "train.py", true},
		{"/home/me/repo/src/my model/train#1.py", "src/my%20model/train%231.py", true},
		{"/home/me/repo/a:b.py", "a%3Ab.py", true},
		{"/home/me/repo/src/100%.py", "src/100%25.py", true},
		{"train.py", "train.py", true}, // relative as recorded: kept
		{"pkg/../train.py", "train.py", true},
		{"/home/me/other/train.py", "", false},
		{"/home/me/repo", "", false},
		{"../train.py", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := sarifURI(root, c.path)
		if got != c.want || ok != c.ok {
			t.Errorf("sarifURI(%q) = %q %v, want %q %v", c.path, got, ok, c.want, c.ok)
		}
	}
	if got := sarifRootURI("/home/me/my repo"); got != "file:///home/me/my%20repo/" {
		t.Errorf("root URI %q", got)
	}
}

func TestShortOp(t *testing.T) {
	for in, want := range map[string]string{
		"autograd::engine::evaluate_function: AddmmBackward0": "autograd: AddmmBackward0",
		"Optimizer.step#Adam.step":                            "optimizer: Adam.step",
		"aten::mm":                                            "aten::mm",
	} {
		if got := shortOp(in); got != want {
			t.Errorf("shortOp(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCppShortName(t *testing.T) {
	for in, want := range map[string]string{
		"at::(anonymous namespace)::structured_mm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>)": "at::structured_mm_out_cuda_functional::set_output_raw_strided",
		"at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)":                                          "at::cuda::setWorkspaceForHandle",
		"_start": "_start",
	} {
		if got := cppShortName(in); got != want {
			t.Errorf("cppShortName(%q) = %q, want %q", in, got, want)
		}
	}
}
