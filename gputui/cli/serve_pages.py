"""The pages `gputui serve` answers with: the login form, the terminal page and a refusal. Ours rather than
textual-serve's template, which loads Roboto Mono from Google Fonts and runs inline scripts: here the font is
the copy textual-serve ships (/static/fonts), and the one script besides textual.js is /page.js, so the
Content-Security-Policy allows no third-party origin and no inline script."""

from __future__ import annotations

from html import escape

_STYLE = """body { background: #0c181f; color: #eee; font-family: "Roboto Mono", monospace; margin: 0; }
@font-face { font-family: "Roboto Mono"; src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf"); }
.note { display: flex; height: 90vh; align-items: center; justify-content: center; }
input, button { font: inherit; padding: 8px; margin: 4px; }"""

LOGIN = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>gputui</title><style>{style}</style></head>
<body><div class="note"><form method="post" action="/login"><p>gputui on {host}: the token printed when it started</p>
<p>{error}</p><input type="password" name="token" autocomplete="off" autofocus><button type="submit">Open</button>
</form></div></body></html>"""

NOTE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>gputui</title><style>{style}</style></head>
<body><div class="note"><p>{text}</p></div></body></html>"""

# textual-serve's page, less its inline scripts, the Google Fonts stylesheet and the ping (the ?ping= URL a
# page would fetch). The buttons are wired by /page.js.
TERMINAL = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="/static/css/xterm.css"><script src="/static/js/textual.js"></script>
<script src="/page.js"></script><style>{style}
.dialog-container {{ position: absolute; width: 100vw; height: 100vh; display: flex; align-items: center;
  justify-content: center; z-index: 10; }}
.shade {{ position: absolute; width: 100%; height: 100%; background: #0c181f; }}
.intro {{ width: 640px; height: 240px; font-size: 16px; z-index: 20; text-align: center; background: #12232d;
  display: flex; align-items: center; justify-content: center; margin: 32px; flex-direction: column; }}
body.-first-byte .intro-dialog {{ display: none; }}
body .textual-terminal {{ opacity: 0; transition: opacity 0.3s ease-out; }}
body.-first-byte .textual-terminal {{ opacity: 1; }}
button {{ padding: 16px 32px; background: #5e0ba7; color: #fff; border: none; margin: 8px; cursor: pointer; }}
.closed-dialog {{ display: none; }}
body.-closed .closed-dialog {{ display: flex; }}
#start {{ display: none; }}
#start.-delay {{ display: block; }}
</style></head><body>
<div class="dialog-container intro-dialog"><div class="shade"></div><div class="intro"><div>{title}</div>
<button type="button" data-restart id="start">Start</button></div></div>
<div class="dialog-container closed-dialog"><div class="shade"></div><div class="intro">
<div class="message">Disconnected.</div><button type="button" data-restart>Restart</button>
{logout}</div></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{websocket}" data-font-size="{font_size}">
</div></body></html>"""

LOGOUT = """<form method="post" action="/logout"><button type="submit">Log out</button></form>"""

# The start and restart buttons (textual-serve wires them with inline onClick, which the policy forbids).
PAGE_JS = """document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-restart]")) {
    button.addEventListener("click", () => {
      const url = new URL(window.location.href);
      url.searchParams.delete("delay");
      window.location.href = url.pathname + "?" + url.searchParams.toString();
    });
  }
});
"""


def login_page(host: str, error: str = "") -> str:
    return LOGIN.format(style=_STYLE, host=escape(host), error=escape(error))


def note_page(text: str) -> str:
    return NOTE.format(style=_STYLE, text=escape(text))


def terminal_page(title: str, websocket: str, font_size: int, logout: bool) -> str:
    return TERMINAL.format(style=_STYLE, title=escape(title),
                           websocket=escape(websocket), font_size=font_size, logout=LOGOUT if logout else "")
