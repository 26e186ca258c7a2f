"""Rich renderables shared by the TUI and the headless CLI, Textual-free: `cells` (bars, percentages,
sparklines, the palette), `columns` (the node and service columns: what each shows, how it sorts, which drop
first when narrow), `wallboard` (big figures, heat map, problems first)."""
