import numpy as np, time, sys
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType
from tests.unit.cpu_kernels.kernel_blocks import quant_rows
IQ=GGMLType.IQ2_XXS
ck.set_threads(1)
x=np.random.default_rng(1).standard_normal(4096).astype(np.float32)
X=np.random.default_rng(1).standard_normal((12,4096)).astype(np.float32)
for label,rows,copies,n in (("cache",512,1,1),("stream",2048,40,1),("prefill12",512,1,12)):
  raws=[quant_rows(IQ,rows,4096,seed=i) for i in range(copies)]
  r={"avx2":[], "avx512":[]}
  xx = x if n==1 else X
  f = ck.matvec if n==1 else ck.matmul
  for rnd in range(7):
    for impl in (("avx2","avx512") if rnd%2 else ("avx512","avx2")):
      t=time.thread_time()
      for k in range(max(1,40//copies)*copies): f(raws[k%copies],IQ,xx,impl=impl)
      r[impl].append((time.thread_time()-t))
  rat=np.array(r["avx2"])/np.array(r["avx512"])
  print(label,"cpu-time ratio avx2/avx512 median %.2f [%.2f..%.2f] best %.2f"%(np.median(rat),*np.percentile(rat,[25,75]),min(r["avx2"])/min(r["avx512"])))
