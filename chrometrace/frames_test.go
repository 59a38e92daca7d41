package chrometrace

import "testing"

func TestIsLibraryFrame(t *testing.T) {
	for name, lib := range map[string]bool{
		"gen_traces.py(143): forward":                             false,
		"nn.Module: Linear_0":                                     false,
		"torch/nn/modules/module.py(1775): _call_impl":            true,
		"<built-in method append of list object at 0x7f09>":       true,
		"<frozen os>(762): encode":                                true,
		"typing.py(2154): cast":                                   true,
		"/opt/venv/lib/python3.12/site-packages/x/y.py(3): f":     true,
		"/home/me/torch/myproject/train.py(10): main":             false,
		"/home/me/src/pytorch/torch/nn/modules/conv.py(548): fwd": true,
		"/work/train.py(40): step":                                false,
	} {
		if got := IsLibraryFrame(name); got != lib {
			t.Errorf("IsLibraryFrame(%q) = %v", name, got)
		}
	}
	if f, ok := ParseFrame("gen_traces.py(143): forward"); !ok || f.Filename != "gen_traces.py" || f.Line != 143 || f.Name != "forward" {
		t.Errorf("ParseFrame: %+v %v", f, ok)
	}
	if got := NormalizeFrame("<built-in method append of list object at 0x7f09249ac140>"); got != "<built-in method append of list object>" {
		t.Errorf("NormalizeFrame: %q", got)
	}
}

// torch.compile's generated code is never the user's line.
func TestGeneratedFrames(t *testing.T) {
	for name, want := range map[string]bool{
		"/tmp/torchinductor_root/vj/cvjumc5ik5wo6o7dtrlqzvzdswee2ph3dvzwh5wndl4ywelb3ssm.py(117): call": true,
		"<eval_with_key>.3(12): forward":                       true,
		"torch/_dynamo/eval_frame.py(632): _fn":                true,
		"/home/u/.triton/cache/ab/kernel.py(3): triton_":       true,
		"train.py(42): step":                                   false,
		"/home/u/project/models/inductor_model.py(9): forward": false,
	} {
		if got := IsGeneratedFrame(name); got != want {
			t.Errorf("IsGeneratedFrame(%q) = %v, want %v", name, got, want)
		}
		if want && !IsLibraryFrame(name) {
			t.Errorf("%q is generated but not passed over as library code", name)
		}
	}
}
