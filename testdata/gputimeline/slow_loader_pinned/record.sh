cat > /tmp/r.py <<'PY'
import torch,gzip,shutil,os,json,time
from torch.profiler import profile,schedule,ProfilerActivity as A
from torch.utils.data import Dataset,DataLoader
d='cuda';torch.manual_seed(0)
class Slow(Dataset):
    def __len__(self): return 10**6
    def __getitem__(self,i):
        time.sleep(0.005)  # 4 items per batch: ~20 ms of host work per batch
        return torch.randn(1024),torch.randn(1)
dl=DataLoader(Slow(),batch_size=4,num_workers=0,pin_memory=True)
m=torch.nn.Sequential(torch.nn.Linear(1024,4096),torch.nn.ReLU(),torch.nn.Linear(4096,1)).to(d)
opt=torch.optim.SGD(m.parameters(),lr=1e-3)
total=torch.zeros((),device=d)
it=iter(dl)
def step():
    global total
    x,y=next(it)
    x=x.to(d,non_blocking=True);y=y.to(d,non_blocking=True)
    loss=(m(x)-y).pow(2).mean()
    opt.zero_grad();loss.backward();opt.step()
    total+=loss.detach()
for _ in range(3): step()
torch.cuda.synchronize()
with profile(activities=[A.CPU,A.CUDA],schedule=schedule(wait=1,warmup=1,active=4),record_shapes=True,with_stack=True) as p:
    for i in range(6):
        step();p.step()
print('mean loss',total.item()/9)
p.export_chrome_trace('/tmp/t.json')
o=os.environ['OUT']
with open('/tmp/t.json','rb') as f, gzip.open(o+'/trace.json.gz','wb',9) as g: shutil.copyfileobj(f,g)
json.dump({'scenario':'slow_loader_pinned','torch':torch.__version__,'gpu':torch.cuda.get_device_name(),'planted':'DataLoader(num_workers=0, pin_memory=True) whose __getitem__ sleeps 5 ms (4 per batch); inputs copied with non_blocking=True; loss accumulated on the GPU, no .item() in the loop','window':{'wait':1,'warmup':1,'active':4}},open(o+'/truth.json','w'),indent=1)
PY
PYTHONUNBUFFERED=1 python3 /tmp/r.py && ls -la $OUT
