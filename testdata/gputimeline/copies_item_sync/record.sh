cat > /tmp/r.py <<'PY'
import torch,gzip,shutil,os,json
from torch.profiler import profile,schedule,ProfilerActivity as A
d='cuda';torch.manual_seed(0)
m=torch.nn.Sequential(torch.nn.Linear(4096,4096),torch.nn.ReLU(),torch.nn.Linear(4096,1)).to(d)
opt=torch.optim.SGD(m.parameters(),lr=1e-3)
pin=torch.randn(4096,4096).pin_memory()
def step():
    xa=torch.randn(4096,4096)
    x=xa.to(d)
    y=pin.to(d,non_blocking=True)
    loss=m(x+y).pow(2).mean()
    opt.zero_grad();loss.backward();opt.step()
    w=m[0].weight.detach().cpu()
    return loss.item()
for _ in range(3): step()
torch.cuda.synchronize()
with profile(activities=[A.CPU,A.CUDA],schedule=schedule(wait=1,warmup=1,active=4),record_shapes=True,with_stack=True) as p:
    for i in range(6):
        step();p.step()
p.export_chrome_trace('/tmp/t.json')
o=os.environ['OUT']
with open('/tmp/t.json','rb') as f, gzip.open(o+'/trace.json.gz','wb',9) as g: shutil.copyfileobj(f,g)
json.dump({'scenario':'copies_item_sync','torch':torch.__version__,'gpu':torch.cuda.get_device_name(),'planted':'per step: 64 MiB pageable H2D (randn on CPU then .to(cuda)), 64 MiB pinned H2D non_blocking, 64 MiB D2H .cpu() of a weight, loss.item()','window':{'wait':1,'warmup':1,'active':4}},open(o+'/truth.json','w'),indent=1)
PY
PYTHONUNBUFFERED=1 python3 /tmp/r.py && ls -la $OUT
