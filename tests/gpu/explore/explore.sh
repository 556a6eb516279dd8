#!/usr/bin/env bash
# Exploratory GPU run: capture rules, graph capture under gpumem, NCCL's cuMem calls.
set -x
O=$OUT; B=$PWD/.device-carry/build
export LD_LIBRARY_PATH=$B/lib/deps:/usr/local/cuda/lib64
G=$B/bin/gpumem
nvidia-smi -L
python3 -c "import torch, os; print(torch.__version__); import nvidia; print(os.listdir(os.path.dirname(nvidia.__path__[0])+'/nvidia'))" 2>&1
ls $(python3 -c "import nvidia,os;print(nvidia.__path__[0])")/*/lib 2>&1 | head -40
true || nvcc -std=c++17 -o /tmp/capture_probe tests/gpu/explore/capture_probe.cc -lcuda && /tmp/capture_probe > $O/capture_probe.txt 2>&1
cd tests/gpu/explore
for mode in tensors; do
  case $mode in
    plain) PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 120 python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
    default) timeout 120 $G record -o $O/graph_$mode.trace -- python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
    expandable) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 $G record -o $O/graph_$mode.trace -- python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
    tensors) timeout 120 $G record --tensors -o $O/graph_$mode.trace -- python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
    tensors_nocupti) GPUMEM_CUPTI=0 timeout 120 $G record --tensors -o $O/graph_$mode.trace -- python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
    tensors_nolaunch) GPUMEM_CUPTI=0 GPUMEM_LAUNCHES=0 timeout 120 $G record --tensors -o $O/graph_$mode.trace -- python3 graph_capture.py > $O/graph_$mode.txt 2>&1; echo "exit $?" >> $O/graph_$mode.txt;;
  esac
done
nvidia-smi -L | grep -c GPU
true || timeout 200 torchrun --nproc_per_node 2 ddp.py > $O/ddp_plain.txt 2>&1; echo "exit $?" >> $O/ddp_plain.txt
mkdir -p $O/ddp
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC timeout 200 $G record -o $O/ddp -- torchrun --nproc_per_node 2 ddp.py > $O/ddp_gpumem.txt 2>&1; echo "exit $?" >> $O/ddp_gpumem.txt
ls -la $O/ddp
for t in $(ls $O/ddp/*.trace); do
  $G dump --counts $t > $t.counts.txt 2>&1
  $G dump $t 2>&1 | grep -E '^#[0-9]+ memory .*cuMem(Release|Create|Retain|Import|Export|Map|Unmap|AddressReserve|AddressFree)' > $t.cumem.txt
  $G symbolize -o $t.sym $t > /dev/null 2>&1; $G report --leaks --peak $t.sym > $t.report.txt 2>&1
done
cd $O && rm -f *.trace ddp/*.sym && tar czf /tmp/x.tgz *.txt ddp && rm -rf $O/* && mv /tmp/x.tgz $O/
