"""The seeded demo's GPU figures at start, worked out by hand from its scenario (gputui/backends/demo/scenario.py
and the extra pods simulation.py adds), never by the functions under test: what the header, the wallboard, the
pools and the fleet of clusters must say of it.

Offered, per scheme:
- whole cards: ten H100 nodes of 8 (gpu-h100-07's GPU 5 and gpu-h100-05's GPU 6 fell off the bus: 78), eight A100
  nodes of 8 (64), six L40S nodes of 4 (24): 166;
- MIG: gpu-a100-09, four cards in two 3g.40gb slices and four in seven 1g.10gb: 8 + 28 = 36;
- shared: gpu-l40s-07, four L40S time-sliced four ways: 16;
- DRA: gpu-h100-11's eight devices: 8.

In use, per scheme:
- whole cards: llama-3-70b 8 pods x 4 and qwen2-72b 5 x 4 on H100 (52, counted as 51: a node's use is at most what
  it offers, and gpu-h100-05's two pods hold 8 cards of the 7 it still offers, its GPU 6 having fallen off the bus
  under one of them; the 16-GPU pretraining job fits no node and stays Pending); mistral-7b 8 x 1, codellama-34b
  5 x 2, the fine-tuning job's 8 and the notebook's 1 on A100 (27); bge-large 4 x 1 on L40S (4): 82;
- MIG: llama-3-8b 5 pods x one 3g.40gb slice: 5;
- shared: gte-base 6 pods x 1 replica: 6;
- DRA: deepseek-r1-distill-70b 3 pods x 2 devices: 6.

Idle: the notebook's one card (busy=False); every other pod keeps its GPUs busy."""

from __future__ import annotations

from gputui.vocabulary.gpu_resources import GpuUse

DEMO_USE = GpuUse(in_use=(51 + 27 + 4, 5, 6, 6), offered=(78 + 64 + 24, 36, 16, 8))
DEMO_NODES = 10 + 8 + 6 + 3

# pool -> (nodes, units offered, units allocated, GpuUse): the pool label is the GPU family (hopper: the H100
# nodes with the DRA one, ampere: the A100 nodes with the MIG one, ada-lovelace: the L40S nodes with the shared one).
DEMO_POOLS = {
    "hopper": (11, 78 + 8, 51 + 6, GpuUse((51, 0, 0, 6), (78, 0, 0, 8))),
    "ampere": (9, 64 + 36, 27 + 5, GpuUse((27, 5, 0, 0), (64, 36, 0, 0))),
    "ada-lovelace": (7, 24 + 16, 4 + 6, GpuUse((4, 0, 6, 0), (24, 0, 16, 0))),
}
DEMO_ALLOCATED = sum(allocated for _, _, allocated, _ in DEMO_POOLS.values())  # 99 units
DEMO_IDLE = 1  # the notebook's card
DEMO_CANARIES = 2  # llama-3-70b's v2 at 10 % and mistral-7b's canary at 20 %: split weights in flight
