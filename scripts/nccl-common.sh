# nccl-common.sh: shared by the nccl-*.sh device scripts (sourced, not run).

# write_allreduce FILE: the one-line all-reduce torchrun runs, one rank per GPU.
write_allreduce() {
	cat >"$1" <<'PY'
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "sum", x[0].item())
dist.destroy_process_group()
PY
}

# find_libnccl: the libnccl.so PyTorch loads (the nvidia-nccl pip package), else
# the first on the machine.
find_libnccl() {
	python3 -c 'import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], "lib"); print([os.path.join(d, f) for f in os.listdir(d) if f.startswith("libnccl.so")][0])' 2>/dev/null ||
		find / -xdev -name 'libnccl.so*' 2>/dev/null | head -1
}

# nccl_lines RAW OUT: NCCL's INFO and WARN lines of RAW without the host:pid:tid
# prefix.
nccl_lines() {
	grep -a 'NCCL INFO\|NCCL WARN' "$1" | sed 's/^.*NCCL \(INFO\|WARN\)/NCCL \1/' >"$2"
}
