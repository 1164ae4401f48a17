import numpy as np, time
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, same_bits
IQ=GGMLType.IQ2_XXS
raw=quant_rows(IQ,512,4096,seed=1)   # 512 rows x 1056 B = 540 KB: in L2
x=np.random.default_rng(1).standard_normal(4096).astype(np.float32)
assert same_bits(ck.matvec(raw,IQ,x,impl="avx512"), ck.matvec(raw,IQ,x,impl="avx2"))
ck.set_threads(1)
r={"avx2":[], "avx512":[]}
for rnd in range(9):
  for impl in (("avx2","avx512") if rnd%2 else ("avx512","avx2")):
    t=time.perf_counter()
    for _ in range(50): ck.matvec(raw,IQ,x,impl=impl)
    r[impl].append((time.perf_counter()-t)/50)
rat=np.array(r["avx2"])/np.array(r["avx512"])
print("in-cache 1 thread: avx2 %.3f ms avx512 %.3f ms (best); ratio median %.2f q %.2f..%.2f"%(min(r["avx2"])*1e3,min(r["avx512"])*1e3,np.median(rat),*np.percentile(rat,[25,75])))
