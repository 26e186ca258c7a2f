"""Node detail: E writes the node's evidence bundle under the state directory and says where (issue 37 item 5),
the same bundle `gputui evidence NODE` writes; before, E did nothing."""

import stat
import tarfile

from gputui.ui.screens.node_detail import NodeDetailScreen
from tests.ui.pilot import loaded, wait_for


async def test_e_in_node_detail_writes_the_bundle_and_says_where(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.open_node("gpu-h100-07")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#gpus"))
        await pilot.press("E")
        await wait_for(pilot, lambda: any("written to" in n.message for n in app._notifications), what="the bundle")
        [said] = [n.message for n in app._notifications if "written to" in n.message]
        [written] = (tmp_path / "state" / "gputui" / "evidence").iterdir()
        assert str(written) in said and said.startswith("SIMULATED") and "parts missing" in said
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        with tarfile.open(written, "r:gz") as tar:
            names = tar.getnames()
            summary = tar.extractfile("evidence/SUMMARY.md").read().decode()
        assert {"evidence/node.json", "evidence/pods.json", "evidence/faults.json", "evidence/MANIFEST"} <= set(names)
        assert "# Evidence: node gpu-h100-07" in summary and "XID 79" in summary
