"""Judgements over one ClusterSnapshot, pure: health and problems, node pools, fleet figures and sums,
versions, GPU Operator upgrades, and out-of-rotation labels. Imports only the snapshot, the vocabulary and
gputui.base."""
