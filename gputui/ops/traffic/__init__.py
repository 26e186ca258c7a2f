"""Traffic weights between an inference service's versions: a pure plan, then apply.

`plan_shift` turns "move to 80/20" (or "+10 on v2") into integer weights on the
route's own scale, the checks that block or warn, and the exact PATCH the
router needs. `apply_shift` sends that PATCH through the backend's writer and
audit-logs it. One adapter per router kind:

- Gateway API HTTPRoute: `spec.rules[].backendRefs[].weight` (0..1,000,000, relative);
- Istio VirtualService: `spec.http[].route[].weight` (non-negative; not all 0 with
  several destinations);
- SMI TrafficSplit: `spec.backends[].weight` (relative; legacy: the SMI project is archived);
- Argo Rollouts: no "set weight" exists; promote / promote-full / abort / retry
  patches on the Rollout. Its controller owns the routes: gputui never patches them.

Why JSON patch (RFC 6902) with `test` operations for the list-shaped routes,
not a JSON merge patch: custom resources take no strategic merge patch, and a
merge patch replaces a whole list, so changing one weight means resending every
rule (matches, filters, other backends) as read a moment before, silently
reverting anything another operator, a GitOps controller or a second gputui
changed in between. Making that merge patch conditional on
`metadata.resourceVersion` would fail on any unrelated write (gateway
controllers update status all the time). A JSON patch touches only the weights,
and its `test` operations on each backend's name and old weight make the
apiserver apply it only onto exactly what the plan was made from: the whole
patch or nothing (422), never a half-shift or a clobbered edit.

Percentages become integer weights with the largest-remainder method, so they
always add up exactly to the scale (100, or the route's own total when it is a
multiple of 100, e.g. 1000 or 1,000,000).

The router kinds are one table, `gputui.vocabulary.router_kinds`. Split: `vocabulary` (the plan's types), `weights`
(percentages and integer weights), `adapters` (a route kind's weights read and patched by its row), `plans`
(plan_shift, plan_rollout), `apply` (apply_shift).
"""

from __future__ import annotations

from gputui.ops.traffic.adapters import (  # noqa: F401 - the package's API
    ADAPTERS,
)
from gputui.ops.traffic.apply import (  # noqa: F401 - the package's API
    apply_shift,
)
from gputui.ops.traffic.plans import (  # noqa: F401 - the package's API
    PlanBasis,
    RolloutRead,
    find_service,
    needs_route,
    on_route_now,
    plan_rollout,
    plan_rollout_now,
    plan_shift,
    read_route,
    replan,
    route_object_name,
    router_api,
    served_api_versions,
)
from gputui.ops.traffic.vocabulary import (  # noqa: F401 - the package's API
    ARGO_MANAGER,
    DEFAULT_SCALE,
    HTTPROUTE_MAX_WEIGHT,
    ROLLOUT_ACTIONS,
    STEP_PCT,
    Patch,
    ShiftError,
    ShiftPlan,
    Step,
    Targets,
    VersionShift,
    fmt_pct,
)
from gputui.ops.traffic.weights import (  # noqa: F401 - the package's API
    apportion,
    rebalance,
    resolve_targets,
    route_scale,
    shares,
)
