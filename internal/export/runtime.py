# ---------------------------------------------------------------------------
# nvcomm runtime (internal/export/runtime.py): the same in every exported
# program. It reads PLAN, PREDICTED, TOPOLOGY, PROBES and DEFAULT_SEED above.
# Semantics: docs/plan.md (steps), docs/simulate.md (data, shards),
# docs/export.md (this program).
# ---------------------------------------------------------------------------
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
}
# Bits of each dtype's significand: integers up to 2**bits are exact.
EXACT_BITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53, "int32": 31, "int64": 53}
REDUCE_OPS = ("sum", "prod", "max", "min")
COLLECTIVES = ("Scatter", "Gather", "Allgather", "Broadcast", "Reduce", "Allreduce",
               "ReduceScatter", "SendRecv", "AllToAll")


class PlanError(Exception):
    """The plan cannot be executed: what `nvcomm simulate` reports as an error."""


def step_error(s, msg):
    return PlanError("step %d (%s): %s" % (s["id"], s["type"], msg))


def operands(x):
    """The buffers (tensors) an op or a step reads: "inputs" for several, else "input"."""
    return x.get("inputs") or [x.get("input")]


# --- input data: SplitMix64, exactly as internal/sim (docs/simulate.md) ------

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _signed(u):
    u &= _M64
    return u - (1 << 64) if u >> 63 else u


def _mix_int(z):
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _lsr(z, k):
    """Logical right shift of an int64 tensor holding 64-bit unsigned values."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix_tensor(z):
    z = (z ^ _lsr(z, 30)) * _signed(0xBF58476D1CE4E5B9)
    z = (z ^ _lsr(z, 27)) * _signed(0x94D049BB133111EB)
    return z ^ _lsr(z, 31)


def input_data(seed, index, n, small, device):
    """The n row-major values of the fusion input at position index of PLAN's tensors."""
    key = _mix_int(seed + _GAMMA * (index + 1))
    i = torch.arange(n, dtype=torch.int64, device=device)
    h = _lsr(_mix_tensor(i * _signed(_GAMMA) + _signed(key + _GAMMA)), 32)
    if small:
        table = torch.tensor([-2.0, -1.0, 1.0, 2.0], dtype=torch.float64, device=device)
        return table[h & 3]
    return (torch.remainder(h, 1025) - 512).to(torch.float64)


# --- shards: the IterDomain graph of internal/sim/domain.go and shard.go -----

class Domain:
    """A tensor's logical axes, the schedule replayed on them, and the loop domain."""

    def __init__(self, t):
        self.name = t["name"]
        self.ext, self.red, self.par = [], [], []
        red = t.get("reduction_axes") or []
        for a in red:
            if a < 0 or a >= len(t["shape"]):
                raise PlanError("tensor %r: reduction axis %d out of range" % (self.name, a))
        self.logical = [self._add(n, k in red) for k, n in enumerate(t["shape"])]
        for n in t["shape"]:
            if n < 1:
                raise PlanError("tensor %r: logical extents must be positive, got %r" % (self.name, t["shape"]))
        self.loop = list(self.logical)
        self.exprs = []  # (kind, inputs, outputs), kind "split" or "merge"
        for k, st in enumerate(t.get("schedule") or []):
            try:
                self._apply(st)
            except PlanError as e:
                raise PlanError("tensor %r: schedule step %d: %s" % (self.name, k, e))

    def _add(self, extent, reduction=False):
        self.ext.append(extent)
        self.red.append(reduction)
        self.par.append("")
        return len(self.ext) - 1

    def _pos(self, pos):
        if pos < 0 or pos >= len(self.loop):
            raise PlanError("loop position %d out of range (%d axes)" % (pos, len(self.loop)))
        return self.loop[pos]

    def _apply(self, st):
        if len(st) != 1:
            raise PlanError("expected exactly one transform, got %d" % len(st))
        (kind, arg), = st.items()
        if kind in ("split", "outer_split"):
            self._split(arg["axis"], arg["factor"], kind == "outer_split")
        elif kind == "merge":
            self._merge(arg["axis"])
        elif kind == "reorder":
            if sorted(arg) != list(range(len(self.loop))):
                raise PlanError("reorder %r is not a permutation" % (arg,))
            self.loop = [self.loop[old] for old in arg]
        elif kind == "parallelize":
            i = self._pos(arg["axis"])
            if arg["type"] not in ("DIDx", "DIDy", "DIDz", "Serial"):
                raise PlanError("unknown parallel type %r" % arg["type"])
            self.par[i] = "" if arg["type"] == "Serial" else arg["type"]
        else:
            raise PlanError("unknown transform %r" % kind)

    def _split(self, pos, factor, outer):
        i = self._pos(pos)
        if factor < 1:
            raise PlanError("split factor %d must be positive" % factor)
        if self.par[i]:
            raise PlanError("cannot split loop axis %d: it is parallelized on %s" % (pos, self.par[i]))
        rest = -(-self.ext[i] // factor)
        o_ext, i_ext = (factor, rest) if outer else (rest, factor)
        o, n = self._add(o_ext, self.red[i]), self._add(i_ext, self.red[i])
        self.exprs.append(("split", [i], [o, n]))
        self.loop[pos:pos + 1] = [o, n]

    def _merge(self, pos):
        if pos < 0 or pos + 1 >= len(self.loop):
            raise PlanError("merge position %d needs a partner" % pos)
        a, b = self.loop[pos], self.loop[pos + 1]
        if self.par[a] or self.par[b]:
            raise PlanError("cannot merge loop axes %d and %d: a device-parallel axis cannot be merged" % (pos, pos + 1))
        if self.red[a] != self.red[b]:
            raise PlanError("cannot merge a reduction axis with a non-reduction axis")
        m = self._add(self.ext[a] * self.ext[b], self.red[a])
        self.exprs.append(("merge", [a, b], [m]))
        self.loop[pos:pos + 2] = [m]

    def even(self):
        """Whether no split leaves holes."""
        return all(k != "split" or self.ext[o[0]] * self.ext[o[1]] == self.ext[i[0]] for k, i, o in self.exprs)


def mesh_coords(mesh, device):
    if device not in mesh["devices"]:
        return None
    i, c = mesh["devices"].index(device), []
    for e in reversed(mesh["shape"]):
        c.append(i % e)
        i //= e
    return c[::-1]


class Shard:
    """Which elements of a global tensor each device of its mesh holds, in buffer order."""

    def __init__(self, t, mesh):
        self.name, self.mesh = t["name"], mesh
        n = 1
        for e in mesh["shape"]:
            n *= e
        if n != len(mesh["devices"]) or len(set(mesh["devices"])) != n or min(mesh["devices"]) < 0:
            raise PlanError("tensor %r: malformed mesh %r" % (self.name, mesh))
        self.d = d = Domain(t)
        self.value = [k for k, i in enumerate(d.logical) if not d.red[i]]
        self.shape = [d.ext[d.logical[k]] for k in self.value]
        self.numel = math.prod(self.shape)
        self.role, self.mesh_axis, used = [], [], {}
        for pos, i in enumerate(d.loop):
            role, axis = "iterate", -1
            if d.red[i]:
                role = "reduction"
            elif d.par[i]:
                if d.par[i] in used:
                    raise PlanError("tensor %r: loop axes %d and %d are both parallelized on %s" % (self.name, used[d.par[i]], pos, d.par[i]))
                used[d.par[i]] = pos
                axis = len(mesh["shape"]) - {"DIDx": 1, "DIDy": 2, "DIDz": 3}[d.par[i]]
                if axis < 0:
                    raise PlanError("tensor %r: %s needs a mesh of higher rank than %r" % (self.name, d.par[i], mesh["shape"]))
                role = "device"
            self.role.append(role)
            self.mesh_axis.append(axis)
        alloc = t.get("allocation")
        self.sorted = alloc is None
        self.order = list(range(len(d.loop))) if alloc is None else list(alloc)
        if alloc is not None:
            if len(set(alloc)) != len(alloc) or any(p < 0 or p >= len(d.loop) for p in alloc):
                raise PlanError("tensor %r: allocation %r must list distinct loop positions" % (self.name, alloc))
            for pos, role in enumerate(self.role):
                if role == "iterate" and pos not in alloc:
                    raise PlanError("tensor %r: allocation %r misses local loop axis %d" % (self.name, alloc, pos))

    def _fixed(self, device):
        """The fixed loop values of device, or None when it holds nothing."""
        c = mesh_coords(self.mesh, device)
        if c is None:
            return None
        fixed = {}
        for pos, i in enumerate(self.d.loop):
            if self.role[pos] == "device":
                fixed[i] = c[self.mesh_axis[pos]]
                if fixed[i] >= self.d.ext[i]:
                    return None
            elif self.role[pos] == "reduction":
                fixed[i] = 0
        return fixed

    def count(self, device):
        """The number of elements device holds (0 outside the mesh)."""
        fixed = self._fixed(device)
        if fixed is None:
            return 0
        if self.d.even():
            return math.prod(self.d.ext[self.d.loop[p]] for p in self.order if self.role[p] == "iterate")
        return self.offsets(device, torch.device("cpu")).numel()

    def offsets(self, device, dev):
        """Row-major offsets into the global tensor of device's elements, in buffer order."""
        d, fixed = self.d, self._fixed(device)
        if fixed is None:
            return torch.empty(0, dtype=torch.int64, device=dev)
        vals = dict(fixed)
        nd = len(self.order)
        full = [1] * nd
        for k, pos in enumerate(self.order):
            i = d.loop[pos]
            if self.role[pos] == "iterate":
                view = [1] * nd
                view[k] = full[k] = d.ext[i]
                vals[i] = torch.arange(d.ext[i], dtype=torch.int64, device=dev).view(view)
        valid = True
        for kind, ins, outs in reversed(d.exprs):
            if kind == "split":
                v = vals[outs[0]] * d.ext[outs[1]] + vals[outs[1]]
                valid = valid & (v < d.ext[ins[0]])
                vals[ins[0]] = v
            else:
                inner = d.ext[ins[1]]
                vals[ins[0]], vals[ins[1]] = vals[outs[0]] // inner, vals[outs[0]] % inner
        off = torch.zeros(full, dtype=torch.int64, device=dev)
        for k, pos in enumerate(self.value):
            off = off * self.shape[k] + vals[d.logical[pos]]
        off = off.reshape(-1)
        if valid is not True:
            off = off[torch.broadcast_to(torch.as_tensor(valid, device=dev), full).reshape(-1)]
        return torch.sort(off).values if self.sorted else off

    def unflatten(self, off):
        idx = []
        for e in reversed(self.shape):
            idx.append(off % e)
            off //= e
        return idx[::-1]


# --- the plan ----------------------------------------------------------------

class Plan:
    """PLAN with its tensors' shards, checked by replaying the steps on buffer sizes."""

    def __init__(self, p):
        self.p = p
        self.tensors = {t["name"]: t for t in p["tensors"]}
        self.index = {t["name"]: k for k, t in enumerate(p["tensors"])}
        self.shards = {}
        for t in p["tensors"]:
            if t["dtype"] not in DTYPES:
                raise PlanError("tensor %r: unknown dtype %r" % (t["name"], t["dtype"]))
            if t["mesh"] not in p["meshes"]:
                raise PlanError("tensor %r: unknown mesh %r" % (t["name"], t["mesh"]))
            self.shards[t["name"]] = Shard(t, p["meshes"][t["mesh"]])
        self.produced = {o["output"] for o in p["ops"]}
        for k, o in enumerate(p["ops"]):
            if any(t not in self.tensors for t in operands(o)) or o["output"] not in self.tensors:
                raise PlanError("op %d: unknown tensor" % k)
        self.inputs = [t["name"] for t in p["tensors"] if t["name"] not in self.produced]
        self.last = {}
        for k, s in enumerate(p["steps"]):
            self.last[s["op"]] = k
        self.holders = {}  # step id -> per team, whether each member holds the input
        self._replay()

    def devices(self):
        """Every device a mesh or a step names."""
        ds = set()
        for m in self.p["meshes"].values():
            ds.update(m["devices"])
        for s in self.p["steps"]:
            for team in s.get("teams") or []:
                ds.update(team)
            ds.update(s.get("devices") or [])
        return ds

    def dtype_name(self, s):
        if s["op"] < 0 or s["op"] >= len(self.p["ops"]):
            raise step_error(s, "op %d does not exist" % s["op"])
        return self.tensors[self.p["ops"][s["op"]]["output"]]["dtype"]

    def _replay(self):
        held = {}
        for name in self.inputs:
            for d in self.shards[name].mesh["devices"]:
                held[(d, name)] = self.shards[name].count(d)
        for s in self.p["steps"]:
            self.dtype_name(s)
            if s["type"] in COLLECTIVES:
                if s["kind"] != "collective":
                    raise step_error(s, "kind is %r, a %s is a collective step" % (s["kind"], s["type"]))
                self._replay_collective(s, held)
            else:
                if s["kind"] != "local":
                    raise step_error(s, "kind is %r, expected local" % s["kind"])
                self._replay_local(s, held)

    def _replay_collective(self, s, held):
        teams = s.get("teams") or []
        check_teams(s, teams)
        n, out = s["count"]["input"], s["count"]["output"]
        self.holders[s["id"]] = []
        for team in teams:
            has = [(d, s["input"]) in held for d in team]
            self.holders[s["id"]].append(has)
            want, writers = collective_sizes(s, team, has, [held.get((d, s["input"])) for d in team])
            if out != want:
                raise step_error(s, "count.output is %d, but on team %r the step produces %d elements" % (out, team, want))
            for r in writers:
                held[(team[r], s["output"])] = out

    def _replay_local(self, s, held):
        if s["type"] == "Slice":
            return self._replay_slice(s, held)
        if s["type"] in ("Pad", "Unpad"):
            return self._replay_pad(s, held)
        devs = s.get("devices") or []
        if not devs:
            raise step_error(s, "a local step needs at least one device")
        if len(set(devs)) != len(devs):
            raise step_error(s, "a device is listed twice")
        out, reads = local_count(s)
        for d in devs:
            for name, n in zip(operands(s), reads):
                if (d, name) not in held:
                    raise step_error(s, "device %d has no buffer %r" % (d, name))
                if held[(d, name)] != n:
                    raise step_error(s, "buffer %r on device %d has %d elements, the step reads %d" % (name, d, held[(d, name)], n))
            held[(d, s["output"])] = out


    def _replay_slice(self, s, held):
        teams = s.get("teams") or []
        if not teams or s.get("devices"):
            raise step_error(s, "a Slice takes teams, not devices")
        check_teams(s, teams)
        n, m = s["count"]["input"], s["count"]["output"]
        for team in teams:
            if n != len(team) * m:
                raise step_error(s, "count.input %d must be the team size %d times count.output %d" % (n, len(team), m))
            for d in team:
                if (d, s["input"]) not in held:
                    raise step_error(s, "device %d has no buffer %r" % (d, s["input"]))
                if held[(d, s["input"])] != n:
                    raise step_error(s, "buffer %r on device %d has %d elements, count.input is %d" % (s["input"], d, held[(d, s["input"])], n))
                held[(d, s["output"])] = m

    def _replay_pad(self, s, held):
        pad_fill(s)
        devs, valid, dims = s.get("devices") or [], s.get("valid") or [], s.get("dims") or []
        if not devs or len(valid) != len(devs):
            raise step_error(s, "valid has %d boxes for %d devices" % (len(valid), len(devs)))
        if any(x < 0 for x in dims):
            raise step_error(s, "dims %r are negative" % (dims,))
        full = math.prod(dims)
        padded, real = s["count"]["output"], s["count"]["input"]
        if s["type"] == "Unpad":
            padded, real = real, padded
        if padded != full:
            raise step_error(s, "the padded count %d must be the product %d of dims %r" % (padded, full, dims))
        hull = [0] * len(dims)
        for d, box in zip(devs, valid):
            if len(box) != len(dims) or any(v < 0 or v > e for v, e in zip(box, dims)):
                raise step_error(s, "valid box %r of device %d does not fit dims %r" % (box, d, dims))
            hull = [max(h, v) for h, v in zip(hull, box)]
            want = math.prod(box) if s["type"] == "Pad" else full
            if held.get((d, s["input"])) != want:
                raise step_error(s, "device %d must hold buffer %r of %d elements" % (d, s["input"], want))
            held[(d, s["output"])] = full if s["type"] == "Pad" else math.prod(box)
        if math.prod(hull) != real:
            raise step_error(s, "the unpadded count %d must be %d, the box that holds every device's real box" % (real, math.prod(hull)))


def pad_fill(s):
    """A Pad's fill value (an Unpad has none)."""
    if s["type"] == "Unpad":
        if s.get("fill") is not None:
            raise step_error(s, "an Unpad takes no fill")
        return 0
    fills = {"0": 0.0, "1": 1.0, "-inf": -math.inf, "inf": math.inf}
    if s.get("fill") not in fills:
        raise step_error(s, "fill %r is not 0, 1, -inf or inf" % (s.get("fill"),))
    return fills[s["fill"]]


def check_teams(s, teams):
    if not teams:
        raise step_error(s, "a collective needs at least one team")
    seen = set()
    for team in teams:
        if not team:
            raise step_error(s, "empty team")
        members = team
        if s["type"] == "SendRecv":
            if len(team) != 2:
                raise step_error(s, "team %r must be [sender, receiver]" % (team,))
            if team[0] == team[1]:
                members = team[:1]
        for d in members:
            if d in seen:
                raise step_error(s, "device %d appears more than once in teams %r" % (d, teams))
            seen.add(d)
    if s["type"] in ("Scatter", "Gather", "Broadcast", "Reduce", "SendRecv"):
        if len(teams) != 1:
            raise step_error(s, "a rooted collective has exactly one team, got %d" % len(teams))
        if s.get("root") not in teams[0]:
            raise step_error(s, "root must be a device of team %r" % (teams[0],))
        if s["type"] == "SendRecv" and s["root"] != teams[0][0]:
            raise step_error(s, "root %d must be the sender, the first device of team %r" % (s["root"], teams[0]))
    if s["type"] in ("Reduce", "Allreduce", "ReduceScatter") and s.get("reduce_op") not in REDUCE_OPS:
        raise step_error(s, "reduce_op must be one of sum, prod, max, min")


def collective_sizes(s, team, has, sizes):
    """The output count a collective produces on team and the ranks it writes."""
    typ, n, T = s["type"], s["count"]["input"], len(team)

    def need(ranks, count):
        for r in ranks:
            if not has[r]:
                raise step_error(s, "device %d has no buffer %r" % (team[r], s["input"]))
        for r in ranks:
            if sizes[r] != count:
                raise step_error(s, "buffer %r on device %d has %d elements, count.input is %d" % (s["input"], team[r], sizes[r], count))

    def chunk():
        if n % T:
            raise step_error(s, "count.input %d is not a multiple of the team size %d" % (n, T))
        return n // T

    everyone = range(T)
    if typ == "Allgather":
        need(everyone, n)
        return T * n, everyone
    if typ in ("ReduceScatter", "Scatter"):
        m = chunk()
        need(everyone if typ == "ReduceScatter" else [team.index(s["root"])], n)
        return m, everyone
    if typ in ("Allreduce", "AllToAll"):
        if typ == "AllToAll":
            chunk()
        need(everyone, n)
        return n, everyone
    if typ == "Broadcast":
        need([team.index(s["root"])], n)
        return n, everyone
    if typ == "SendRecv":
        need([0], n)
        return n, [1]
    holders = [r for r in everyone if has[r]]  # Gather, Reduce
    if not holders:
        raise step_error(s, "no member of team %r holds buffer %r" % (team, s["input"]))
    need(holders, n)
    return (len(holders) * n if typ == "Gather" else n), [team.index(s["root"])]


def local_count(s):
    """The output count of a local step and the count it reads from each input, checked against its fields."""
    typ, n, dims = s["type"], s["count"]["input"], s.get("dims") or []
    reads = [n]
    if typ == "Copy":
        want = n
    elif typ in ("Permute", "LocalReduce"):
        if any(x < 0 for x in dims) or math.prod(dims) != n:
            raise step_error(s, "dims %r hold %d elements, count.input is %d" % (dims, math.prod(dims), n))
        if typ == "Permute":
            if sorted(s.get("perm") or []) != list(range(len(dims))):
                raise step_error(s, "perm %r is not a permutation of the %d dims" % (s.get("perm"), len(dims)))
            want = n
        else:
            rd = s.get("reduce_dims") or []
            if len(set(rd)) != len(rd) or any(k < 0 or k >= len(dims) for k in rd):
                raise step_error(s, "reduce_dims %r must be distinct positions in dims %r" % (rd, dims))
            if s.get("reduce_op") not in REDUCE_OPS:
                raise step_error(s, "reduce_op must be one of sum, prod, max, min")
            want = n // max(math.prod(dims[k] for k in rd), 1)
    elif typ == "Matmul":
        want, reads = matmul_counts(s)
    elif typ == "Pointwise":
        want, reads = pointwise_counts(s)
    else:
        raise step_error(s, "unknown step type")
    if typ not in ("Matmul", "Pointwise") and len(operands(s)) != 1:
        raise step_error(s, "a %s reads one buffer" % typ)
    if s["count"]["output"] != want:
        raise step_error(s, "count.output is %d, expected %d" % (s["count"]["output"], want))
    return want, reads


def matmul_counts(s):
    """A Matmul's output count and what it reads from A [Bt, M, K] and B [Bt, K, N] (or [K, N])."""
    dims = s.get("dims") or []
    if len(dims) != 4 or any(x < 1 for x in dims) or len(operands(s)) != 2:
        raise step_error(s, "a Matmul reads inputs [A, B] with dims [Bt, M, K, N] of positive extents, got %r and %r" % (operands(s), dims))
    bt, m, k, n = dims
    if s["count"]["input"] != bt * m * k:
        raise step_error(s, "count.input is %d, expected Bt*M*K = %d" % (s["count"]["input"], bt * m * k))
    return bt * m * n, [bt * m * k, (1 if s.get("broadcast_b") else bt) * k * n]


# Pointwise functions: arity, and the torch function on operands broadcast to each other.
POINTWISE = {
    "add": (2, torch.add), "sub": (2, torch.sub), "mul": (2, torch.mul),
    "maximum": (2, torch.maximum), "minimum": (2, torch.minimum),
    "relu": (1, lambda x: x.clamp_min(0)), "neg": (1, torch.neg), "abs": (1, torch.abs),
    "copy": (1, lambda x: x),
}


def pointwise_counts(s):
    """A Pointwise's output count and what it reads from each input (its input_dims)."""
    fn, dims, ins = s.get("func"), s.get("dims") or [], operands(s)
    if fn not in POINTWISE:
        raise step_error(s, "func %r is not one of %s" % (fn, ", ".join(POINTWISE)))
    if POINTWISE[fn][0] != len(ins):
        raise step_error(s, "func %s takes %d inputs, got %d" % (fn, POINTWISE[fn][0], len(ins)))
    idims = s.get("input_dims") or []
    if any(x < 1 for x in dims) or len(idims) != len(ins):
        raise step_error(s, "dims %r and input_dims %r must be positive, one input_dims per input" % (dims, idims))
    for d in idims:
        if len(d) != len(dims) or any(e != x and e != 1 for e, x in zip(d, dims)):
            raise step_error(s, "input_dims %r do not broadcast to dims %r" % (d, dims))
    if s["count"]["input"] != math.prod(idims[0]):
        raise step_error(s, "count.input is %d, expected %d (input_dims[0])" % (s["count"]["input"], math.prod(idims[0])))
    return math.prod(dims), [math.prod(d) for d in idims]


# --- reference -----------------------------------------------------------------

class Reference:
    """Every tensor's global value in float64, with what the comparison tolerates."""

    def __init__(self, plan, seed, dev):
        p, self.plan, self.dev = plan.p, plan, dev
        small = any(o["op"] == "prod" for o in p["ops"])
        self.val, self.log2bound, self.terms, self.mag = {}, {}, {}, {}
        for name in plan.inputs:
            self.val[name] = input_data(seed, plan.index[name], plan.shards[name].numel, small, dev)
            self.log2bound[name], self.terms[name] = (1.0 if small else 9.0), 1
        for o in p["ops"]:
            self._eval(o)

    def _eval(self, o):
        names, out = operands(o), o["output"]
        shapes = [self.plan.shards[n].shape for n in names]
        want = self.plan.shards[out].shape
        y = apply_op(o, [self.val[n].view(sh) for n, sh in zip(names, shapes)], want)
        if list(y.shape) != want:
            raise PlanError("op %d (%s): output %r has the wrong logical shape" % (o["index"], o["op"], out))
        self.val[out] = y.reshape(-1)
        self.log2bound[out], self.terms[out] = op_bounds(
            o, shapes, [self.log2bound[n] for n in names], [self.terms[n] for n in names])

    def tolerance(self, name, offs):
        """0 where every partial result is an integer the dtype holds exactly, else terms·2^-bits·Σ|x|."""
        bits = EXACT_BITS[self.plan.tensors[name]["dtype"]]
        if self.log2bound[name] <= bits:
            return 0.0
        return self.terms[name] * 2.0 ** -bits * self._magnitude(name)[offs]

    def _magnitude(self, name):
        if name not in self.mag:
            ops = {o["output"]: o for o in self.plan.p["ops"]}
            if name not in ops:
                self.mag[name] = self.val[name].abs()
            else:
                o = ops[name]
                xs = [self._magnitude(n).view(self.plan.shards[n].shape) for n in operands(o)]
                self.mag[name] = apply_op(o, xs, self.plan.shards[name].shape, magnitude=True).reshape(-1)
        return self.mag[name]


def _linear(x, w, bias=None):
    return torch.nn.functional.linear(x, w, bias)


def _same(x):
    return x


# The layer ops on global values in float64 (docs/plan.md, "ops"), and the
# same combination of absolute values that bounds their rounding (Σ|x|).
LAYER_OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum, "minimum": torch.minimum,
    "relu": lambda x: x.clamp_min(0), "neg": torch.neg, "abs": torch.abs, "matmul": torch.matmul, "linear": _linear,
}
LAYER_MAGNITUDES = dict(LAYER_OPS, sub=torch.add, minimum=torch.maximum, relu=_same, neg=_same, abs=_same)
ARITY = {"add": 2, "sub": 2, "mul": 2, "maximum": 2, "minimum": 2, "relu": 1, "neg": 1, "abs": 1,
         "matmul": 2, "linear": (2, 3), "broadcast": 1, "set": 1, "sum": 1, "prod": 1, "max": 1, "min": 1}


def apply_op(o, xs, out_shape, magnitude=False):
    """Op o on its operands xs (global values viewed in their non-reduction shapes).

    With magnitude, the same combination of absolute values: what the rounding of
    an inexact result is bounded by (sub adds, minimum takes the larger, ...)."""
    op = o["op"]
    arity = ARITY.get(op)
    if arity is None or len(xs) not in (arity if isinstance(arity, tuple) else (arity,)):
        raise PlanError("op %d: %r with %d inputs is not an op" % (o["index"], op, len(xs)))
    if op == "set":
        return xs[0]
    if op in REDUCE_OPS:
        a = o.get("axis")
        if a is None or a < 0 or a >= xs[0].dim():
            raise PlanError("op %d (%s): axis must be a position among the input's non-reduction axes" % (o["index"], op))
        return reduce_dims("max" if magnitude and op == "min" else op, xs[0], [a])
    if op == "broadcast":
        return broadcast_axes(o, xs[0], out_shape)
    try:
        return (LAYER_MAGNITUDES if magnitude else LAYER_OPS)[op](*xs)
    except RuntimeError as e:  # operands whose shapes do not fit
        raise PlanError("op %d (%s): %s" % (o["index"], op, e))


def broadcast_axes(o, x, out_shape):
    """x with new axes at o's axes (positions in the output), expanded to out_shape."""
    axes = o.get("axes") or []
    if sorted(set(axes)) != axes or len(out_shape) != x.dim() + len(axes) or any(a < 0 or a >= len(out_shape) for a in axes):
        raise PlanError("op %d (broadcast): axes %r are not increasing positions among the output's %d axes" % (o["index"], axes, len(out_shape)))
    view = list(x.shape)
    for a in axes:
        view.insert(a, 1)
    try:
        return x.reshape(view).expand(out_shape)
    except RuntimeError as e:
        raise PlanError("op %d (broadcast): %s" % (o["index"], e))


def op_bounds(o, shapes, lbs, terms):
    """log2 of a bound on every partial result's magnitude, and the number of roundings
    an inexact result may carry (L of the tolerance), from those of the operands."""
    op = o["op"]
    if op in REDUCE_OPS:
        n = shapes[0][o["axis"]]
        lb = lbs[0] + math.log2(n) if op == "sum" else lbs[0] * n if op == "prod" else lbs[0]
        return lb, terms[0] * n
    if op in ("add", "sub"):
        return max(lbs) + 1, sum(terms)
    if op in ("maximum", "minimum"):
        return max(lbs), max(terms)
    if op == "mul":
        return sum(lbs), sum(terms) + 1
    if op in ("matmul", "linear"):
        k = shapes[0][-1]
        lb, n = lbs[0] + lbs[1] + math.log2(k), (terms[0] + terms[1] + 1) * k
        if len(lbs) == 3:  # the bias, added after the sum
            lb, n = max(lb, lbs[2]) + 1, n + terms[2]
        return lb, n
    return lbs[0], terms[0]  # set, relu, neg, abs, broadcast: no rounding


def reduce_dims(op, x, dims):
    """Combines dims of x with op, keeping the other dims in order."""
    if not dims:
        return x.clone()
    if op == "sum":
        return x.sum(dim=tuple(dims))
    if op == "max":
        return x.amax(dim=tuple(dims))
    if op == "min":
        return x.amin(dim=tuple(dims))
    for k in sorted(dims, reverse=True):
        x = x.prod(dim=k)
    return x


def identity(op, dtype):
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    big = math.inf if dtype.is_floating_point else torch.iinfo(dtype).max
    return -big if op == "max" else big


# --- execution -----------------------------------------------------------------

class Context:
    """One rank's view: its device, buffers and process groups."""

    def __init__(self, plan, rank, dev, backend, groups):
        self.plan, self.rank, self.dev, self.backend = plan, rank, dev, backend
        self.groups, self.bufs = groups, {}

    def group(self, team):
        return self.groups[tuple(sorted(set(team)))]


def make_groups(plan, cache):
    """Creates one process group per distinct team, on every rank in the same order."""
    groups = {}
    for s in plan.p["steps"]:
        if s["kind"] != "collective":
            continue
        for team in s.get("teams") or []:
            key = tuple(sorted(set(team)))
            if len(key) < 2 or key in groups:
                continue
            if cache is not None and key in cache:
                groups[key] = cache[key]
                continue
            if key == tuple(range(dist.get_world_size())):
                groups[key] = dist.group.WORLD  # the whole job: the default group
                continue
            groups[key] = dist.new_group(ranks=list(key))
            if cache is not None:
                cache[key] = groups[key]
    return groups


_FALLBACK = set()


def _unsupported(e):
    msg = str(e).lower()
    return "support" in msg or "implement" in msg


def attempt(name, fast, slow):
    """Runs fast, or slow once fast has failed as unsupported by this backend (gloo) or device (a dtype's kernel)."""
    if name not in _FALLBACK:
        try:
            return fast()
        except (RuntimeError, NotImplementedError, AttributeError, ValueError) as e:
            if not _unsupported(e):
                raise
            _FALLBACK.add(name)
    return slow()


class Exchange:
    """One rank's part of a step: comm() moves the data (what --bench times), finish() returns the output buffer or None."""

    def __init__(self, comm, finish):
        self.comm, self.finish = comm, finish


def prepare(ctx, s):
    """The rank's Exchange for step s, or None when it takes no part."""
    if s["type"] == "Slice":
        for team in s["teams"]:
            if ctx.rank in team:
                return prepare_slice(ctx, s, team)
        return None
    if s["kind"] == "local":
        if ctx.rank not in s["devices"]:
            return None
        if s["type"] in ("Pad", "Unpad"):
            return prepare_pad(ctx, s, s["valid"][s["devices"].index(ctx.rank)])
        return prepare_local(ctx, s)
    for k, team in enumerate(s["teams"]):
        if ctx.rank in team:
            return prepare_collective(ctx, s, team, ctx.plan.holders[s["id"]][k])
    return None


def prepare_local(ctx, s):
    if s["type"] == "Matmul":
        return prepare_matmul(ctx, s)
    if s["type"] == "Pointwise":
        return prepare_pointwise(ctx, s)
    x, typ = ctx.bufs[s["input"]], s["type"]
    out = {}

    def comm():
        if typ == "Copy":
            out["y"] = x.clone()
        elif typ == "Permute":
            out["y"] = x.view(s["dims"]).permute(s["perm"]).contiguous().view(-1)
        else:
            y = reduce_dims(s["reduce_op"], x.view(s["dims"]), s.get("reduce_dims") or [])
            out["y"] = y.to(x.dtype).reshape(-1)
    return Exchange(comm, lambda: out["y"])


def prepare_matmul(ctx, s):
    """A [Bt, M, K] @ B [Bt, K, N] (or [K, N] for every batch; stored [.., N, K] with
    transpose_b), row-major [Bt, M, N]."""
    bt, m, k, n = s["dims"]
    a, b = (ctx.bufs[name] for name in operands(s))
    a = a.view(bt, m, k)
    kn = (n, k) if s.get("transpose_b") else (k, n)
    b = b.view(*kn) if s.get("broadcast_b") else b.view(bt, *kn)
    if s.get("transpose_b"):
        b = b.transpose(-1, -2)  # a view: cuBLAS reads the transpose in place
    out = {}

    def comm():
        out["y"] = in_dtype("matmul", torch.matmul, [a, b]).reshape(-1)
    return Exchange(comm, lambda: out["y"])


def in_dtype(name, fn, xs):
    """fn on xs in their dtype, or, where the backend has no such kernel (integer
    matmuls on CUDA, float16 on older CPUs), in float64 rounded back: exact
    while every partial result is below 2^53, and a single rounding to the dtype
    otherwise, as the dtype's own kernel rounds."""
    dtype = xs[0].dtype

    def slow():
        y = fn(*(x.double() for x in xs))
        return (y if dtype.is_floating_point else y.round()).to(dtype)
    return attempt((name, dtype, xs[0].device.type), lambda: fn(*xs), slow)


def prepare_pointwise(ctx, s):
    """func on the inputs viewed as their input_dims, broadcast to dims, row-major."""
    name, dims = s["func"], s.get("dims") or []
    xs = [ctx.bufs[n].view(d) for n, d in zip(operands(s), s["input_dims"])]
    out = {}

    def comm():
        out["y"] = in_dtype(name, POINTWISE[name][1], xs).expand(dims).contiguous().view(-1)
    return Exchange(comm, lambda: out["y"])


def prepare_slice(ctx, s, team):
    x, m, r = ctx.bufs[s["input"]], s["count"]["output"], team.index(ctx.rank)
    out = {}

    def comm():
        out["y"] = x[r * m:(r + 1) * m].clone()
    return Exchange(comm, lambda: out["y"])


def prepare_pad(ctx, s, box):
    """Pad: the device's real box at the low corner of dims, fill elsewhere; Unpad: the inverse."""
    x, dims = ctx.bufs[s["input"]], s["dims"]
    window = tuple(slice(0, v) for v in box)
    out = {}

    def comm():
        if s["type"] == "Pad":
            fill = pad_fill(s)
            if not x.dtype.is_floating_point and math.isinf(fill):
                fill = torch.iinfo(x.dtype).max if fill > 0 else torch.iinfo(x.dtype).min
            y = torch.full(dims, fill, dtype=x.dtype, device=x.device)
            y[window] = x.view(box)
            out["y"] = y.view(-1)
        else:
            out["y"] = x.view(dims)[window].contiguous().view(-1)
    return Exchange(comm, lambda: out["y"])


def prepare_collective(ctx, s, team, has):
    typ, me = s["type"], team.index(ctx.rank)
    dtype = DTYPES[ctx.plan.dtype_name(s)]
    x = ctx.bufs.get(s["input"])
    if x is not None:
        x = x.to(dtype).contiguous()
    if len(set(team)) == 1:  # no peers: the collective is a copy (timed as one)
        out = {"y": None}

        def copy():
            out["y"] = x.clone() if x is not None else None
        return Exchange(copy, lambda: out["y"])
    g = ctx.group(team)
    order = sorted(team)  # torch numbers a group's ranks in ascending global rank
    to_team = [team.index(d) for d in order]  # group rank -> team rank
    to_group = [order.index(d) for d in team]  # team rank -> group rank
    if ctx.backend == "gloo" and dtype == torch.bfloat16:
        # gloo has no bfloat16 reductions: move float32 copies, round back after.
        ex = PREPARE[typ](ctx, s, team, has, me, x.float() if x is not None else None, torch.float32, g, to_team, to_group)
        return Exchange(ex.comm, lambda: _cast(ex.finish(), dtype))
    return PREPARE[typ](ctx, s, team, has, me, x, dtype, g, to_team, to_group)


def _cast(y, dtype):
    return None if y is None else y.to(dtype)


def _empty(ctx, n, dtype):
    return torch.empty(n, dtype=dtype, device=ctx.dev)


def _rows(x, T, idx):
    """x viewed as T rows, rows in the order idx."""
    return x.view(T, -1)[torch.tensor(idx, device=x.device)].reshape(-1) if idx != list(range(T)) else x


def _allgather(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    T, n = len(team), s["count"]["input"]
    out = _empty(ctx, T * n, dtype)

    def comm():
        attempt("all_gather_into_tensor",
                lambda: dist.all_gather_into_tensor(out, x, group=g),
                lambda: dist.all_gather(list(out.view(T, n).unbind(0)), x, group=g))
    return Exchange(comm, lambda: _rows(out, T, to_group))


def _reduce_scatter(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    T, op = len(team), REDUCE[s["reduce_op"]]
    xin = _rows(x, T, to_team).contiguous()
    m = s["count"]["input"] // T
    out = _empty(ctx, m, dtype)

    def slow():
        buf = xin.clone()
        dist.all_reduce(buf, op=op, group=g)
        out.copy_(buf.view(T, m)[to_group[me]])

    def comm():
        attempt("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(out, xin, op=op, group=g), slow)
    return Exchange(comm, lambda: out)


def _allreduce(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    buf = x.clone()
    return Exchange(lambda: dist.all_reduce(buf, op=REDUCE[s["reduce_op"]], group=g), lambda: buf)


def _alltoall(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    T, n = len(team), s["count"]["input"]
    xin = _rows(x, T, to_team).contiguous()
    out = _empty(ctx, n, dtype)

    def slow():
        every = _empty(ctx, T * n, dtype)
        dist.all_gather(list(every.view(T, n).unbind(0)), xin, group=g)
        out.copy_(every.view(T, T, n // T)[:, to_group[me]].reshape(-1))

    def comm():
        attempt("all_to_all_single", lambda: dist.all_to_all_single(out, xin, group=g), slow)
    return Exchange(comm, lambda: _rows(out, T, to_group))


def _broadcast(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    buf = x.clone() if ctx.rank == s["root"] else _empty(ctx, s["count"]["input"], dtype)
    return Exchange(lambda: dist.broadcast(buf, src=s["root"], group=g), lambda: buf)


def _scatter(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    T, m = len(team), s["count"]["output"]
    out = _empty(ctx, m, dtype)
    parts = None
    if ctx.rank == s["root"]:
        parts = [x.view(T, m)[to_team[q]].contiguous() for q in range(T)]
    return Exchange(lambda: dist.scatter(out, parts, src=s["root"], group=g), lambda: out)


def _gather(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    T, n = len(team), s["count"]["input"]
    src = x if has[me] else torch.zeros(n, dtype=dtype, device=ctx.dev)
    root = ctx.rank == s["root"]
    parts = [_empty(ctx, n, dtype) for _ in range(T)] if root else None

    def finish():
        if not root:
            return None
        return torch.cat([parts[to_group[r]] for r in range(T) if has[r]])
    return Exchange(lambda: dist.gather(src, parts, dst=s["root"], group=g), finish)


def _reduce(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    n = s["count"]["input"]
    buf = x.clone() if has[me] else torch.full((n,), identity(s["reduce_op"], dtype), dtype=dtype, device=ctx.dev)
    root = ctx.rank == s["root"]
    return Exchange(lambda: dist.reduce(buf, dst=s["root"], op=REDUCE[s["reduce_op"]], group=g),
                    lambda: buf if root else None)


def _sendrecv(ctx, s, team, has, me, x, dtype, g, to_team, to_group):
    sender, receiver = team
    if ctx.rank == sender:
        buf, op, peer = x, dist.isend, receiver
    else:
        buf, op, peer = _empty(ctx, s["count"]["input"], dtype), dist.irecv, sender

    def comm():
        for req in dist.batch_isend_irecv([dist.P2POp(op, buf, peer, g)]):
            req.wait()
    return Exchange(comm, lambda: buf if ctx.rank == receiver else None)


PREPARE = {
    "Allgather": _allgather, "ReduceScatter": _reduce_scatter, "Allreduce": _allreduce,
    "AllToAll": _alltoall, "Broadcast": _broadcast, "Scatter": _scatter, "Gather": _gather,
    "Reduce": _reduce, "SendRecv": _sendrecv,
}
REDUCE = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def run_step(ctx, s):
    ex = prepare(ctx, s)
    if ex is None:
        return
    ex.comm()
    y = ex.finish()
    if y is not None:
        ctx.bufs[s["output"]] = y


# --- checking --------------------------------------------------------------------

def fmt(v):
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 2 ** 63 else repr(v)


def check_op(ctx, ref, k, step_id):
    """The first mismatch of op k's output on this rank, as a dict, or None."""
    plan, name = ctx.plan, ctx.plan.p["ops"][k]["output"]
    shard = plan.shards[name]
    if ctx.rank not in shard.mesh["devices"]:
        return None
    offs = shard.offsets(ctx.rank, ref.dev)
    mis = {"op": k, "step": step_id, "tensor": name, "device": ctx.rank, "flat_index": -1,
           "logical_index": None, "expected": offs.numel(), "actual": 0}
    buf = ctx.bufs.get(name)
    if buf is None:
        mis["reason"] = 'device %d holds no buffer "%s"' % (ctx.rank, name)
        return mis
    if buf.numel() != offs.numel():
        mis["actual"] = buf.numel()
        mis["reason"] = "size: the buffer has %d elements, the shard has %d" % (buf.numel(), offs.numel())
        return mis
    want = ref.val[name][offs]
    got = buf.to(device=ref.dev, dtype=torch.float64)
    bad = ~((got - want).abs() <= ref.tolerance(name, offs))
    if not bool(bad.any()):
        return None
    i = int(bad.nonzero()[0, 0])
    mis.update(flat_index=i, logical_index=shard.unflatten(int(offs[i])),
               expected=float(want[i]), actual=float(got[i]), reason="value differs")
    return mis


def describe(m):
    where = "op %d" % m["op"]
    if m["step"] >= 0:
        where += " (after step %d)" % m["step"]
    if m["device"] < 0:
        return "%s, tensor %s: %s" % (where, m["tensor"], m["reason"])
    where += ", tensor %s, device %d" % (m["tensor"], m["device"])
    if m["flat_index"] < 0:
        return "%s: %s" % (where, m["reason"])
    return "%s, flat index %d, logical index [%s]: expected %s, actual %s (%s)" % (
        where, m["flat_index"], " ".join(str(i) for i in m["logical_index"]), fmt(m["expected"]), fmt(m["actual"]), m["reason"])


def first_mismatch(plan, per_rank):
    """The mismatch simulate would report: the earliest op, the first device in mesh order."""
    for k, o in enumerate(plan.p["ops"]):
        if k not in plan.last:
            return {"op": k, "step": -1, "tensor": o["output"], "device": -1, "flat_index": -1,
                    "logical_index": None, "expected": 0, "actual": 0,
                    "reason": "no step implements op %d (%s)" % (k, o["op"])}
        for d in plan.shards[o["output"]].mesh["devices"]:
            m = per_rank[d].get(k)
            if m is not None:
                return m
    return None


def check_data(plan, seed, dev):
    """Compares the generated data with the values `nvcomm simulate` uses (PROBES)."""
    if seed != DEFAULT_SEED:
        return "not checked (seed %d; the program embeds simulate's values for seed %d)" % (seed, DEFAULT_SEED)
    small = any(o["op"] == "prod" for o in plan.p["ops"])
    for name, want in sorted(PROBES.items()):
        got = input_data(seed, plan.index[name], len(want), small, dev).tolist()
        if got != [float(v) for v in want]:
            return "DIFFERS from simulate for %s: %r, simulate %r" % (name, got[:8], want[:8])
    return "same as simulate (%d values of %d inputs)" % (sum(len(v) for v in PROBES.values()), len(PROBES))


# --- timing ------------------------------------------------------------------------

def bench(ctx, args):
    """Median seconds of each step on this rank; 0 where it takes no part."""
    times = []
    for s in ctx.plan.p["steps"]:
        barrier(ctx)
        ex = prepare(ctx, s)
        if ex is None:
            times.append(0.0)
            continue
        for _ in range(args.warmup):
            ex.comm()
        times.append(time_calls(ctx.dev, ex.comm, args.bench, args.timing))
    barrier(ctx)
    return times




def barrier(ctx):
    if ctx.backend == "nccl":
        dist.barrier(device_ids=[ctx.dev.index])
    else:
        dist.barrier()


def bench_report(plan, times, out):
    rows = []
    lines = ["step  type            measured (us)  predicted (us)  measured/predicted"]
    for s, t in zip(plan.p["steps"], times):
        pred = PREDICTED[s["id"]] if PREDICTED else None
        ratio = "%.2f" % (t / pred) if pred else "-"
        lines.append("%-5d %-15s %13.1f  %14s  %s" % (s["id"], s["type"], t * 1e6, "%.1f" % (pred * 1e6) if pred else "-", ratio))
        rows.append({"step": s["id"], "type": s["type"], "measured_s": t, "predicted_s": pred})
    total, ptotal = sum(times), sum(PREDICTED) if PREDICTED else None
    lines.append("total %-15s %13.1f  %14s" % ("", total * 1e6, "%.1f" % (ptotal * 1e6) if ptotal else "-"))
    print("\n".join(lines), file=out)
    return rows


# --- main ----------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description="Run nvcomm plan %r on torch.distributed and check it." % PLAN["fusion"])
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="process group backend (default: nccl when CUDA is available, else gloo)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the input data (as nvcomm simulate --seed)")
    ap.add_argument("--bench", type=int, default=0, metavar="N", help="time every step: median of N runs after --warmup")
    ap.add_argument("--warmup", type=int, default=10, help="untimed runs before timing (default 10)")
    ap.add_argument("--timing", choices=TIMINGS, default="queued", help=TIMING_HELP)
    ap.add_argument("--json", metavar="FILE", help="write the result as JSON (rank 0)")
    ap.add_argument("--timeout", type=float, default=300, help="process group timeout in seconds")
    args = ap.parse_args(argv)
    if args.seed < 0 or args.bench < 0 or args.warmup < 0:
        ap.error("--seed, --bench and --warmup must be non-negative")
    return args


def init(args):
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))


def main(argv=None, group_cache=None, out=sys.stdout):
    """Runs the plan; returns 0 on PASS, 1 on a mismatch or an unusable plan, 2 on a usage error.

    A caller that has initialized torch.distributed already (a driver running
    several programs in one job) may pass a dict to share process groups."""
    args = parse_args(argv)
    own = not dist.is_initialized()
    if own:
        init(args)
    try:
        return run(args, group_cache, out)
    finally:
        if own:
            dist.destroy_process_group()


def run(args, group_cache, out):
    # TF32 keeps 10 bits of a float32 operand: a Matmul of exact integers would round.
    torch.backends.cuda.matmul.allow_tf32 = False
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = dist.get_backend()
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    say = (lambda *a: print(*a, file=out, flush=True)) if rank == 0 else (lambda *a: None)
    try:
        plan = Plan(PLAN)
    except PlanError as e:
        say("error: %s" % e)
        return 1
    need = max(plan.devices()) + 1
    if world < need:
        say("error: the plan uses devices up to %d: run it with at least %d processes (torchrun --nproc-per-node=%d), got %d" % (need - 1, need, need, world))
        return 2
    say("plan %s: %d steps on devices %s; %d ranks, backend %s, seed %d" % (
        PLAN["fusion"], len(PLAN["steps"]), sorted(plan.devices()), world, backend, args.seed))
    ctx = Context(plan, rank, dev, backend, make_groups(plan, group_cache))
    data = check_data(plan, args.seed, dev) if rank == 0 else ""
    say("data: %s" % data)
    mine = execute(ctx, args.seed) if rank in plan.devices() else {}
    every = [None] * world
    dist.all_gather_object(every, mine)
    result = {"plan": PLAN["fusion"], "backend": backend, "world_size": world, "seed": args.seed,
              "data": data, "pass": False, "mismatch": None, "steps": []}
    m = first_mismatch(plan, every)
    result["mismatch"], result["pass"] = m, m is None and not data.startswith("DIFFERS")
    say("PASS" if result["pass"] else "FAIL: %s" % (describe(m) if m else "data " + data))
    if args.bench:
        times = torch.tensor(bench(ctx, args), dtype=torch.float64, device=dev)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        if rank == 0:
            result["steps"] = bench_report(plan, times.tolist(), out)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0 if result["pass"] else 1


def execute(ctx, seed):
    """Loads the inputs, runs every step and checks each op after its last step."""
    plan = ctx.plan
    ref = Reference(plan, seed, ctx.dev)
    for name in plan.inputs:
        shard = plan.shards[name]
        if ctx.rank in shard.mesh["devices"]:
            vals = ref.val[name][shard.offsets(ctx.rank, ctx.dev)]
            ctx.bufs[name] = vals.to(DTYPES[plan.tensors[name]["dtype"]])
    found = {}
    for k, s in enumerate(plan.p["steps"]):
        run_step(ctx, s)
        if plan.last[s["op"]] == k:
            m = check_op(ctx, ref, s["op"], s["id"])
            if m is not None:
                found[s["op"]] = m
    return found


if __name__ == "__main__":
    sys.exit(main())
