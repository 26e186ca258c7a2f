"""Node detail's heavier actions, each a read or a write in a thread: a drain of the selected GPU's pods only
(`r` on a GPU row; issue 37 item 3) and the node's evidence bundle (`E`; issue 37 item 5). The screen itself
(gputui.ui.screens.node_detail) stands on them."""

from __future__ import annotations

from gputui.backends.base import bindings_for, error_line
from gputui.ops.drain.options import DrainOptions
from gputui.ui.base import ClusterScreen
from gputui.ui.messages import GpuDrainPlanned
from gputui.ui.widgets.virtual_table import VirtualTable


class NodeActions(ClusterScreen):
    node_name: str

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "drain_gpu":  # only with the GPU table focused on a row: else the same key drains the node
            table = self.query_one("#gpus", VirtualTable)
            return table.has_focus and table.selected_key is not None
        return True

    def action_drain_gpu(self) -> None:
        """Plan a drain of the selected GPU's pods: which pods are bound to it is read now (DCGM's pod labels,
        DRA claims: network reads, in a thread), then the same plan screen as a node's drain, titled for it."""
        snap, gpu = self.app.snapshot, self.query_one("#gpus", VirtualTable).selected_key
        if snap is None or gpu is None or not self.allowed("drain"):
            return
        reader, node, pods = self.app.backend.reader, self.node_name, snap.pods_on(self.node_name)

        def read() -> None:
            from gputui.ops.drain.gpu_target import gpu_options  # noqa: PLC0415 (loaded with the first GPU drain)

            try:
                bindings = bindings_for(reader, node, pods)
                base = DrainOptions(session_deadline_s=self.app.settings.session_deadline,
                                    engine_shutdown_s=self.app.settings.engine_shutdown)
                self.post_message(GpuDrainPlanned(str(gpu), gpu_options(base, snap, node, gpu, bindings), None))
            except Exception as exc:  # noqa: BLE001 - said, never a crash
                self.post_message(GpuDrainPlanned(str(gpu), None, error_line(exc)))

        self.run_worker(read, thread=True, exclusive=True, group="gpu-drain", exit_on_error=False)

    def on_gpu_drain_planned(self, message: GpuDrainPlanned) -> None:
        if message.options is None:
            self.app.notify(f"GPU {message.gpu}: {message.error}", severity="warning", markup=False)
            return
        from gputui.ui.runs.drain import start_drain  # noqa: PLC0415 (the drain machinery loads with the first drain)
        from gputui.ui.screens.drain_plan import DrainPlanScreen  # noqa: PLC0415 (screen: loaded when first shown)
        from gputui.ui.screens.drain_progress import DrainProgressScreen  # noqa: PLC0415

        def chosen(picked: DrainOptions | None) -> None:
            if picked is not None:
                self.app.push_screen(DrainProgressScreen(start_drain(self.app, [self.node_name], picked)))

        self.app.push_screen(DrainPlanScreen([self.node_name], message.options), chosen)

    def action_evidence(self) -> None:
        """The node's evidence bundle (gputui.ops.evidence), written under the state directory by a thread (API
        and Prometheus reads); where it went, or why not, is a notification (App.notify is thread-safe)."""
        snap = self.app.snapshot
        if snap is None or snap.node(self.node_name) is None:
            return
        app, node = self.app, self.node_name
        app.notify(f"writing the evidence bundle of {node}…")

        def write() -> None:
            from gputui.ops import evidence, evidence_write  # noqa: PLC0415 (loaded when first asked)

            try:
                ev = evidence.gather(app.backend, node, audit_log=app.settings.audit_log, snapshot=snap,
                                     pool_labels=app.settings.pool_labels)
                path = evidence_write.default_path(node, app.clock())
                evidence_write.write(path, evidence_write.archive(ev))
            except Exception as exc:  # noqa: BLE001 - said, never a crash
                app.notify(f"evidence of {node} not written: {error_line(exc)}", severity="error")
                return
            app.notify(evidence_write.done_line(ev, path), severity="warning" if ev.missing else "information")

        self.run_worker(write, thread=True, exclusive=True, group="evidence", exit_on_error=False)
