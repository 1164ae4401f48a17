import numpy as np, time, sys
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType
from tests.unit.cpu_kernels.kernel_blocks import quant_rows
IQ=GGMLType.IQ2_XXS
ck.set_threads(1)
cases=[a.split(":") for a in sys.argv[1:]] or [("cache","1","1"),("stream","1","40"),("cache","12","1"),("stream","12","40")]
for label,n,copies in cases:
  n=int(n); copies=int(copies)
  rows=512 if copies==1 else 2048
  raws=[quant_rows(IQ,rows,4096,seed=i) for i in range(copies)]
  X=np.random.default_rng(1).standard_normal((n,4096)).astype(np.float32)
  r={"avx2":[], "avx512":[]}
  for rnd in range(5):
    for impl in (("avx2","avx512") if rnd%2 else ("avx512","avx2")):
      t=time.thread_time()
      for k in range(max(1,40//copies)*copies): ck.matmul(raws[k%copies],IQ,X,impl=impl)
      r[impl].append((time.thread_time()-t))
  rat=np.array(r["avx2"])/np.array(r["avx512"])
  print(label,n,"cpu-time avx2/avx512 median %.2f [%.2f..%.2f]"%(np.median(rat),*np.percentile(rat,[25,75])), "avx512 %.2f ms/matrix"%(min(r["avx512"])/ (max(1,40//copies)*copies)*1e3), flush=True)
