import shlex

from gputui.cli.parser import build_parser
from gputui.cli.serve import child_command, is_loopback


def argv_of(*args: str) -> list[str]:
    return shlex.split(child_command(build_parser().parse_args(list(args))))[3:]  # after "python -m gputui"


def test_the_pages_gputui_is_read_only_unless_writes_are_allowed_and_keeps_the_flags_given():
    assert argv_of("--demo", "serve", "--wallboard") == ["--demo", "--read-only", "--wallboard"]
    assert argv_of("serve", "--context", "prod-eu", "--refresh", "5", "--allow-writes") == [
        "--context", "prod-eu", "--refresh", "5.0"]
    assert "--read-only" in argv_of("--kubeconfig", "/k a", "serve")
    assert argv_of("--kubeconfig", "/k a", "serve")[:2] == ["--kubeconfig", "/k a"]  # quoted for the shell
    assert argv_of("serve", "--debug")[-2:] == ["--debug", "--read-only"]  # the page's gputui logs (to its file)


def test_only_loopback_goes_without_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.3.4.5")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("wall.example.com")
