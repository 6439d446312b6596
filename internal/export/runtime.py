# ---------------------------------------------------------------------------
# nvcomm runtime (internal/export/runtime.py): the same in every exported
# program. It builds every rank's input shards from simulate's data, calls
# RUN, the plan's function above, checks every op's output against a float64
# reference, and times RUN's blocks with --bench. It reads RUN, PLAN,
# PREDICTED, TOPOLOGY, PROBES and DEFAULT_SEED above. Semantics: docs/plan.md
# (steps), docs/simulate.md (data, shards), docs/export.md (this program).
# ---------------------------------------------------------------------------
import argparse
import ast
import datetime
import inspect
import json
import math
import os
import re
import sys
import textwrap

import torch
import torch.distributed as dist

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
}
# Bits of each dtype's significand: integers up to 2**bits are exact.
EXACT_BITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53, "int32": 31, "int64": 53}


class PlanError(Exception):
    """The plan cannot be checked: a tensor whose shards cannot be computed."""


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


# The data sets of four values, by h mod 4, and log2 of every data set's largest magnitude.
DATA_TABLES = {"small": [-2.0, -1.0, 1.0, 2.0], "positive": [1.0, 2.0, 3.0, 4.0]}
DATA_LOG2 = {"wide": 9.0, "small": 1.0, "positive": 2.0}


def data_set(p):
    """The data set simulate fills plan p's inputs with: "positive" when an op needs it
    (POSITIVE_DATA: log, sqrt, div, exp, ...), else "small" with a prod, else "wide"; or
    the one export torch --data named (DATA)."""
    if DATA is not None:
        return DATA
    names = [o["op"] for o in p["ops"]]
    if any(n in POSITIVE_DATA for n in names):
        return "positive"
    return "small" if "prod" in names else "wide"


def input_data(seed, index, n, data, device, bound=0):
    """The n row-major values of the fusion input at position index of PLAN's tensors:
    with a bound, the indices h mod bound of an input a lookup indexes with (index_bounds)."""
    key = _mix_int(seed + _GAMMA * (index + 1))
    i = torch.arange(n, dtype=torch.int64, device=device)
    h = _lsr(_mix_tensor(i * _signed(_GAMMA) + _signed(key + _GAMMA)), 32)
    if bound:
        return torch.remainder(h, bound).to(torch.float64)
    if data in DATA_TABLES:
        table = torch.tensor(DATA_TABLES[data], dtype=torch.float64, device=device)
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
    """PLAN with its tensors' shards."""

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
        self.bounds = index_bounds(self)
        # The outputs of ops that leave pending terms (docs/fusion.md, "placements").
        self.pending = {t["name"] for t in p["tensors"] if t.get("partial") and t["name"] in self.produced}
        self.last = {}  # op -> its last step: the step after which the op is checked
        for k, s in enumerate(p["steps"]):
            self.last[s["op"]] = k

    def devices(self):
        """Every device a mesh or a step names: the ranks that call RUN."""
        ds = set()
        for m in self.p["meshes"].values():
            ds.update(m["devices"])
        for s in self.p["steps"]:
            for team in s.get("teams") or []:
                ds.update(team)
            ds.update(s.get("devices") or [])
        return ds


def index_bounds(plan):
    """The fusion inputs a lookup (INDEX_OPS: its indices' and its table's operand, and the
    table's dim of the rows) reads as its indices, directly or through sets, views and
    broadcasts (cross_entropy's labels), with the rows of its table: simulate fills them with indices below that, the least over their
    lookups (internal/sim's IndexBounds)."""
    producer = {o["output"]: o for o in plan.p["ops"]}
    bounds = {}
    for o in plan.p["ops"]:
        if o["op"] not in INDEX_OPS or len(operands(o)) != 2:
            continue
        names, (ix, tx, dim) = operands(o), INDEX_OPS[o["op"]]
        rows = plan.shards[names[tx]].shape[dim]
        name = names[ix]
        while name in producer and (producer[name]["op"] in ("set", "broadcast") or producer[name]["op"] in VIEW_OPS):
            name = operands(producer[name])[0]
        if name not in producer and rows > 0:
            bounds[name] = min(bounds.get(name, rows), rows)
    return bounds


# --- reference -----------------------------------------------------------------

class Reference:
    """Every tensor's global value in float64, with what the comparison tolerates."""

    def __init__(self, plan, seed, dev):
        p, self.plan, self.dev = plan.p, plan, dev
        data = data_set(p)
        self.val, self.log2bound, self.terms, self.mag, self.err = {}, {}, {}, {}, {}
        for name in plan.inputs:
            bound = plan.bounds.get(name, 0)
            self.val[name] = input_data(seed, plan.index[name], plan.shards[name].numel, data, dev, bound)
            self.log2bound[name], self.terms[name] = math.log2(bound) if bound else DATA_LOG2[data], 1
            if scaled(plan, name):
                # simulate's values times 2^-DATA_SCALE: exact in every dtype, but sums of them
                # mix scales, so no result built from them is claimed exact.
                self.val[name] = self.val[name] * 2.0 ** -DATA_SCALE
                self.log2bound[name] = _INF
            self.err[name] = torch.zeros_like(self.val[name])
        for o in p["ops"]:
            self._eval(o)

    def _eval(self, o):
        names, out = operands(o), o["output"]
        if o["op"] in REDUCE_OPS and names[0] in self.plan.pending:
            # Pending terms' reference holds their reduction: the set from them copies it.
            self.val[out], self.log2bound[out], self.terms[out] = self.val[names[0]], self.log2bound[names[0]], self.terms[names[0]]
            self.err[out] = self.err[names[0]]
            return
        shapes = [self.plan.shards[n].shape for n in names]
        want = self.plan.shards[out].shape
        if out in self.plan.pending:
            want = want[1:]  # the op's values: the reduction of its terms
        if o["op"] in PASSES_SUMS and out in self.plan.pending:
            # An add, sub or neg of pending terms of sums (docs/fusion.md, "placements"): the op
            # of its operands' values, which their references hold.
            for n in names:
                if n not in self.plan.pending:
                    raise PlanError("op %d (%s): cannot check it: it reads the terms of the Partial input %r "
                                    "term by term (docs/export.md, \"Data and the check\")" % (o["index"], o["op"], n))
            shapes = [self.value_shape(n) for n in names]
        y = apply_op(o, with_scalar(o, [self.val[n].view(sh) for n, sh in zip(names, shapes)], self._scalar(o)), want)
        if list(y.shape) != want:
            raise PlanError("op %d (%s): output %r has the wrong logical shape" % (o["index"], o["op"], out))
        self.val[out] = y.reshape(-1)
        c = (o.get("scalar") or {}).get("value", 0.0)
        self.log2bound[out], self.terms[out] = op_bounds(
            o, with_scalar(o, shapes, []), with_scalar(o, [self.log2bound[n] for n in names], scalar_log2(c)),
            with_scalar(o, [self.terms[n] for n in names], 1))
        if ROUNDING.get(o["op"]) in VALUE_BOUNDED:
            y, self.mag[out], err = self._bounded(o, names, y)
            self.val[out] = y.reshape(-1)
        else:
            err = self._carried(o, names, shapes, y, want)
        self.err[out] = torch.nan_to_num(err.reshape(-1), nan=_INF)
        of = o.get("of")
        if of is not None and of["output"] == out:
            self._check_composite(o, of, y)

    def _check_composite(self, o, of, y):
        """The composite's output, as its expansion computed it in float64, against torch's own
        function of the composite's operands (torch.softmax, torch.mean, torch.log_softmax,
        torch.nn.functional.cross_entropy, torch.nn.functional.layer_norm,
        torch.nn.functional.scaled_dot_product_attention; rms_norm and, before torch 2.0, sdpa
        written out, which torch 1.13 lacks): the expansion is torch's op, to float64's rounding."""
        xs = []
        for n in of["inputs"]:
            x = self.val[n].view(self.value_shape(n))
            partial = self.plan.tensors[n].get("partial")
            if partial and n not in self.plan.pending:  # an input's terms: the expansion reads their reduction
                x = reduce_dims(partial, x, [0])
            xs.append(x)
        want = composite_reference(of, xs)
        if list(want.shape) != list(y.shape) or not torch.allclose(y, want, rtol=1e-9, atol=1e-12):
            raise PlanError("op %d (%s): the expansion of %s differs from torch's %s" % (o["index"], o["op"], of["output"], of["op"]))

    def tolerance(self, name, offs):
        """0 where every partial result is an integer the dtype holds exactly, else the lesser
        of terms·2^-bits·Σ|x| and the error carried op by op (_carried): both bound it."""
        bits = EXACT_BITS[self.plan.tensors[name]["dtype"]]
        if self.log2bound[name] <= bits:
            return 0.0
        return torch.minimum(self.terms[name] * 2.0 ** -bits * self._magnitude(name)[offs], self.err[name][offs])

    def _carried(self, o, names, shapes, y, want):
        """A bound on |got - want| of op o's output, elementwise, from its operands' (running
        error analysis, Higham's "Accuracy and Stability of Numerical Algorithms" ch. 3): what
        the operands' errors carry through the op, plus its own roundings, u per rounding of
        |y| (a sum of n values: n·u·Σ|x|), u the unit roundoff of the output's dtype plus
        float64's (the reference rounds too). inf where no rule bounds it (the other bound,
        terms·2^-bits·Σ|x|, holds there): a mask whose operands come within their errors of
        a tie, a product along an axis. 0 where the result is exact (log2bound)."""
        op, dtype = o["op"], self.plan.tensors[o["output"]]["dtype"]
        if self.log2bound[o["output"]] <= EXACT_BITS[dtype]:
            return torch.zeros_like(y)
        u = 2.0 ** -EXACT_BITS[dtype] + 2.0 ** -53
        sc = self._scalar(o)
        xs = with_scalar(o, [self.val[n].view(sh) for n, sh in zip(names, shapes)], sc)
        es = with_scalar(o, [self.err[n].view(sh) for n, sh in zip(names, shapes)],
                         None if sc is None else (0 * sc if float(sc).is_integer() else u * sc.abs()))
        return (_CARRIED.get(op) or _CARRIED.get(ROUNDING.get(op)) or _carried_unknown)(o, xs, es, y, want, u)

    def _bounded(self, o, names, y):
        """The reference y of an op whose rounding depends on its operands' values
        (VALUE_BOUNDED: transcendental, quotient), with its magnitude, max(|y|, E / 2^-bits),
        and E,
        elementwise, so that the tolerance (terms 1) is E, the bound on its error: the
        operands' errors carried through (the op's slope near them), ULPS[rounding] ulps of
        the result's scale, and a floor for results the dtype flushes to 0. Where every value
        within the operands' errors overflows the dtype (exp far past its largest value: a
        causal softmax's masked scores, which a tril then drops), the result is inf on both
        sides: y holds inf there and the check asks for it exactly. A PlanError where an
        operand within its error may leave the op's domain (log of x <= 0, a divisor near 0)
        or come near the dtype's largest value: no bound holds there, and the check would
        fail or pass for no reason."""
        op, dtype = o["op"], self.plan.tensors[o["output"]]["dtype"]
        u = 2.0 ** -EXACT_BITS[dtype]
        xs = with_scalar(o, [self.val[n].view(self.plan.shards[n].shape) for n in names], self._scalar(o))
        es = with_scalar(o, [self.tolerance(n, slice(None)) for n in names], 0.0)
        es = [e.view(x.shape) if torch.is_tensor(e) else e for x, e in zip(xs, es)]
        carried, scale = LAYER_MAGNITUDES[op](*xs, *es)
        err = carried + ULPS[ROUNDING[op]] * u * scale + _floor(dtype)
        top = torch.finfo(DTYPES[dtype]).max if DTYPES[dtype].is_floating_point else torch.iinfo(DTYPES[dtype]).max
        over = _overflows(op, xs, es, top).expand(y.shape)
        y = torch.where(over, torch.full_like(y, _INF), y)
        bad = ~over & (~torch.isfinite(err) | ~torch.isfinite(y) | (y.abs() + err > top))
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0, 0])
            raise PlanError("op %d (%s): cannot check it: at element %d, of operands %s, the %s data of simulate "
                            "takes an operand out of %s's domain within its error, or the result beyond %s's range "
                            "(docs/export.md, \"Data and the check\")" % (
                                o["index"], op, i, [fmt(x.expand(y.shape).reshape(-1)[i]) for x in xs],
                                data_set(self.plan.p), op, dtype))
        mag = torch.where(over, torch.full_like(y, _INF), torch.maximum(y.abs(), err / u))
        return y, mag.reshape(-1), torch.where(over, torch.zeros_like(err), err)

    def _magnitude(self, name):
        if name not in self.mag:
            ops = {o["output"]: o for o in self.plan.p["ops"]}
            if name not in ops:
                self.mag[name] = self.val[name].abs()
            elif ops[name]["op"] in REDUCE_OPS and operands(ops[name])[0] in self.plan.pending:
                self.mag[name] = self._magnitude(operands(ops[name])[0])
            else:
                o = ops[name]
                xs = [self._magnitude(n).view(self.value_shape(n)) for n in operands(o)]
                sc = self._scalar(o)
                xs = with_scalar(o, xs, sc.abs() if sc is not None else None)
                self.mag[name] = apply_op(o, xs, self.value_shape(name), magnitude=True).reshape(-1)
        return self.mag[name]


    def _scalar(self, o):
        """o's number operand as a float64 tensor of no dims, None when it has none."""
        sc = o.get("scalar")
        return None if sc is None else torch.tensor(float(sc["value"]), dtype=torch.float64, device=self.dev)

    def value_shape(self, name):
        """The shape of the values the reference holds: a tensor's, a pending one's without its terms."""
        shape = self.plan.shards[name].shape
        return shape[1:] if name in self.plan.pending else shape


def _linear(x, w, bias=None):
    return torch.nn.functional.linear(x, w, bias)


def _same(x):
    return x


def _embedding(ids, table):
    """The rows of table at ids (float64 integers), torch.nn.functional.embedding."""
    return torch.nn.functional.embedding(ids.long(), table)


def _gather(x, index, axis):
    """x at index (float64 integers) along axis (the last dim), torch.gather."""
    return torch.gather(x, axis, index.long())


def _scatter_add(index, src, rows):
    """Zeros [..., rows, e] with src [..., n, e]'s rows added at index [..., n] (float64
    integers; one outside [0, rows) adds nothing): torch.Tensor.scatter_add along dim -2."""
    ids = index.long()
    keep = (ids >= 0) & (ids < rows)
    out = src.new_zeros(*src.shape[:-2], rows + 1, src.shape[-1])
    at = torch.where(keep, ids, rows).unsqueeze(-1).expand_as(src)
    return out.scatter_add(-2, at, src).narrow(-2, 0, rows)


def _cast(x, dtype):
    """x rounded to dtype, as a cast computes it, kept in x's own dtype (float64)."""
    return x.to(DTYPES[dtype]).to(x.dtype)


def _slice(x, axis, start, end):
    """x's entries start to end (exclusive) along axis, torch.narrow."""
    return x.narrow(axis, start, end - start)


def _cat(*xs, axis):
    return torch.cat(xs, dim=axis)


def _gt(a, b):
    """1 where a > b, else 0, in the operands' dtype: torch.gt as a mask. A number first (gt(2, rank))
    is torch.lt of the operands swapped, which torch.gt does not take."""
    if not torch.is_tensor(a):
        return torch.lt(b, a).to(torch.result_type(a, b))
    return torch.gt(a, b).to(torch.result_type(a, b))


def _eq(a, b):
    """1 where a == b, else 0, in the operands' dtype: torch.eq as a mask (a number first swapped)."""
    if not torch.is_tensor(a):
        a, b = b, a
    return torch.eq(a, b).to(torch.result_type(a, b))


def _mask_magnitude(a, b):
    """A mask's magnitude: 1 (its values are 0 and 1, exact in every dtype)."""
    return 0 * (a + b) + 1


def _gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


# The rounding of the ops bounded from their operands' values (ROUNDING "transcendental" and
# "quotient"): each _err_OP of the operands' values and error bounds returns, elementwise,
# the error the operands' errors carry into the result (the op's largest slope within them
# times the error; inf where an operand within its error may leave the op's domain) and the
# scale of the result's own rounding (|f| plus that error; |x| for gelu, whose 1 + erf
# cancels). ULPS is the result's rounding in ulps of that scale: 8 for the transcendental
# functions (CUDA's documented maximum errors: expf, tanhf, erff, rsqrtf 2 ulps, logf 1;
# SLEEF's u10 functions on CPU 1; composed in torch's sigmoid, silu and gelu formulas), 1
# for a quotient (IEEE division is correctly rounded).
VALUE_BOUNDED = ("transcendental", "quotient")
ULPS = {"transcendental": 8, "quotient": 1}
_INF = float("inf")


def _floor(dtype):
    """What a result may lose to the dtype's flush to 0 (32 of its smallest normal: silu of
    -89 is 2e-37 in float32, where exp(89) overflows), or an integer dtype's truncation."""
    dt = DTYPES[dtype]
    return 32 * torch.finfo(dt).tiny if dt.is_floating_point else 1.0


def _within(ok, v):
    """v where the operand stays in the op's domain (ok), inf elsewhere."""
    return torch.where(ok, v, torch.full_like(v, _INF))


# The error an op carries from its operands' error bounds es (values xs; a number operand's
# error its rounding), plus its own roundings of u each (Reference._carried), by its
# rounding rule or, for the rest, its name. Each takes (o, xs, es, y, want, u).

def _carried_additive(o, xs, es, y, want, u):  # add, sub
    e = es[0] + es[1]
    return e + u * (y.abs() + e)


def _carried_multiplicative(o, xs, es, y, want, u):  # mul, square, cast
    if o["op"] == "cast":  # one rounding to the output's dtype
        return es[0] + u * (xs[0].abs() + es[0])
    a, b = (xs[0], xs[0]) if len(xs) == 1 else xs
    ea, eb = (es[0], es[0]) if len(es) == 1 else es
    e = a.abs() * eb + ea * b.abs() + ea * eb
    return e + u * (y.abs() + e)


def _carried_contraction(o, xs, es, y, want, u):  # matmul, linear: k products summed, a bias added
    f, k = LAYER_MAGNITUDES[o["op"]], xs[0].shape[-1]
    (a, b), (ea, eb) = xs[:2], es[:2]
    e = f(a.abs(), eb) + f(ea, b.abs()) + f(ea, eb) + (k + 1) * u * f(a.abs() + ea, b.abs() + eb)
    if len(xs) == 3:
        e = e + es[2] + u * (xs[2].abs() + es[2] + y.abs())
    return e


def _carried_same(o, xs, es, y, want, u):
    """An op that moves, masks or selects values (a view, relu, neg, abs, maximum, cat):
    each result within the largest error of the values it comes from."""
    return apply_op(o, es, want, magnitude=True)


def _carried_mask(o, xs, es, y, want, u):  # gt, eq: exact where no tie lies within the errors
    a, b, e = xs[0], xs[1], es[0] + es[1]
    unsure = (e > 0) & ((a - b).abs() <= e)
    return torch.where(unsure, torch.full_like(y, _INF), torch.zeros_like(y)).expand(want)


def _carried_indexed(o, xs, es, y, want, u):  # embedding, gather: rows of the table, indices exact
    ix, tx, _ = INDEX_OPS[o["op"]]
    if bool((es[ix] != 0).any()):
        return torch.full_like(y, _INF)
    vs = list(es)
    vs[ix] = xs[ix]
    return apply_op(o, vs, want)


def _carried_scatter(o, xs, es, y, want, u):  # scatter_add: n rows of values summed into zeros
    index, src = xs[0], xs[1]
    n = src.shape[-2]
    vs = [index, es[1]] + list(xs[2:])
    ws = [index, src.abs() + es[1]] + list(xs[2:])
    return apply_op(o, vs, want) + n * u * apply_op(o, ws, want)


def _carried_reduction(o, xs, es, y, want, u):  # sum: n values; max, min: one of them
    x, e, op = xs[0], es[0], o["op"]
    if op in ("max", "min"):
        return reduce_dims("max", e, [o["axis"]])
    if op != "sum":
        return torch.full_like(y, _INF)
    n = x.shape[o["axis"]]
    return reduce_dims("sum", e, [o["axis"]]) + n * u * reduce_dims("sum", x.abs() + e, [o["axis"]])


def _carried_broadcast(o, xs, es, y, want, u):
    return broadcast_axes(o, es[0], want)


def _carried_unknown(o, xs, es, y, want, u):
    return torch.full_like(y, _INF)


_CARRIED = {"additive": _carried_additive, "multiplicative": _carried_multiplicative,
            "selecting": _carried_same, "exact": _carried_same, "set": _carried_same,
            "gt": _carried_mask, "eq": _carried_mask, "embedding": _carried_indexed, "gather": _carried_indexed,
            "broadcast": _carried_broadcast, "matmul": _carried_contraction, "linear": _carried_contraction,
            "scatter_add": _carried_scatter, "sum": _carried_reduction, "max": _carried_reduction,
            "min": _carried_reduction, "prod": _carried_reduction}


def _overflows(op, xs, es, top):
    """Where op's result overflows to +inf for every operand within its error, whatever its
    rounding: exp of x with x - e past log(top) by a margin (2^-10: e^(2^-10) - 1 is far
    more than any ulps of exp's error), where the dtype holds no value of it. False
    elsewhere, and for every other op."""
    if op != "exp":
        return torch.zeros((), dtype=torch.bool)
    return xs[0] - es[0] > math.log(top) + 2.0 ** -10


def _err_exp(x, e):
    top = torch.exp(x + e)
    return top * e, top


def _err_log(x, e):
    lo = x - e
    carried = _within(lo > 0, e / lo.clamp(min=1e-300))
    return carried, torch.log(x.clamp(min=1e-300)).abs() + carried


def _sech2(m):
    """sech² of m >= 0 (tanh's slope there), without 1 - tanh² cancelling to 0 where it is
    below float64's epsilon: (2e^-m / (1 + e^-2m))²."""
    return (2 * torch.exp(-m) / (1 + torch.exp(-2 * m))) ** 2


def _err_tanh(x, e):
    # tanh's slope within x ± e is largest nearest 0: sech² of max(|x| - e, 0), with a
    # margin of 1% for its own rounding. Far from 0 it is tiny, where a slope of 1 would
    # carry the whole error of a large argument (gelu_tanh's rule at |x| ~ 10^4).
    carried = 1.01 * _sech2((x.abs() - e).clamp(min=0)) * e
    return carried, torch.tanh(x).abs() + carried


def _err_sigmoid(x, e):
    # sigmoid's slope, σ(1 - σ) = sech²(x/2)/4, is largest nearest 0, as tanh's.
    carried = 1.01 * _sech2((x.abs() - e).clamp(min=0) / 2) / 4 * e
    return carried, torch.sigmoid(x) + carried


def _err_silu(x, e):
    return 1.1 * e + 0 * x, torch.nn.functional.silu(x).abs() + 1.1 * e  # silu's slope is below 1.1


def _err_gelu(x, e):
    return 1.13 * e + 0 * x, x.abs() + 1.13 * e  # gelu's slope is below 1.13


def _err_gelu_tanh(x, e):
    return 1.13 * e + 0 * x, x.abs() + 1.13 * e


def _err_erf(x, e):
    return 1.13 * e + 0 * x, torch.erf(x).abs() + 1.13 * e  # erf's slope is at most 2/sqrt(pi) < 1.13


def _err_sqrt(x, e):
    lo = x - e
    ok = (lo > 0) | ((x == 0) & (lo == 0))  # sqrt(0) of an exact 0 is exact
    carried = _within(ok, torch.where(lo > 0, e / (2 * lo.clamp(min=1e-300).sqrt()), 0 * x))
    return carried, x.clamp(min=0).sqrt() + carried


def _err_rsqrt(x, e):
    lo = x - e
    carried = _within(lo > 0, e / (2 * lo.clamp(min=1e-300) ** 1.5))
    return carried, x.clamp(min=1e-300).rsqrt() + carried


def _err_reciprocal(x, e):
    lo = x.abs() - e
    carried = _within(lo > 0, e / (x.abs() * lo).clamp(min=1e-300))
    return carried, 1 / x.abs().clamp(min=1e-300) + carried


def _err_div(a, b, ea, eb):
    lo = b.abs() - eb
    carried = _within(lo > 0, (ea * b.abs() + a.abs() * eb) / (b.abs() * lo).clamp(min=1e-300))
    return carried, (a / b.abs().clamp(min=1e-300)).abs() + carried


# The ops' tables, which nvcomm writes here from its op registry: LAYER_OPS,
# the elementwise ops and contractions on global values in float64
# (docs/plan.md, "ops"); LAYER_MAGNITUDES, the same combination of absolute
# values that bounds their rounding (Σ|x|); ARITY, every op's operand count;
# ROUNDING, how an elementwise op's result may round; REDUCE_OPS; ATTRS, the
# attributes each op passes its torch function as keywords (permute's dims);
# POSITIVE_DATA, the ops whose fusions get simulate's positive data; INDEX_OPS;
# VIEW_OPS; PASSES_SUMS, the ops that compute on pending terms of sums.
#@ops


def apply_op(o, xs, out_shape, magnitude=False):
    """Op o on its operands xs (global values viewed in their non-reduction shapes).

    With magnitude, the same combination of absolute values: what the rounding of
    an inexact result is bounded by (sub adds, minimum takes the larger, ...)."""
    op = o["op"]
    arity = ARITY.get(op)
    lo, hi = arity if isinstance(arity, tuple) else (arity, arity)  # hi None: any number more
    if lo is None or len(xs) < lo or (hi is not None and len(xs) > hi):
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
        return (LAYER_MAGNITUDES if magnitude else LAYER_OPS)[op](*xs, **{k: o[k] for k in ATTRS.get(op, ())})
    except (RuntimeError, KeyError) as e:  # operands whose shapes do not fit, an attribute left out
        raise PlanError("op %d (%s): %s" % (o["index"], op, e))


def composite_reference(of, xs):
    """Composite op `of` (a plan op's "of") of its operands xs, with torch's own functions."""
    op, x = of["op"], xs[0]
    if op == "sdpa":
        return sdpa_reference(*xs, causal=of.get("causal", False), gqa=of.get("enable_gqa", False))
    if op == "softmax":
        return torch.softmax(x, dim=of["axis"])
    if op == "mean":
        return torch.mean(x, dim=of["axis"])
    if op == "moe_topk":  # each token's top_k experts, ties to the lowest index (a stable sort)
        order = torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :of["top_k"]]
        return torch.zeros_like(x).scatter(-1, order, 1.0)
    if op == "moe_dispatch":  # each selected token's slot in its expert's queue, below capacity
        slot = torch.cumsum(x, dim=-2) - x  # along the tokens: [groups..., tokens, experts]
        c = torch.arange(of["capacity"], dtype=x.dtype, device=x.device)
        return x.unsqueeze(-1) * (slot.unsqueeze(-1) == c).to(x.dtype)
    if op == "log_softmax":
        return torch.log_softmax(x, dim=of["axis"])
    if op == "cross_entropy":  # the classes last: torch's input [N, C] and target [N], flattened
        labels = xs[1]
        loss = torch.nn.functional.cross_entropy(x.reshape(-1, x.shape[-1]), labels.reshape(-1).long(),
                                                 reduction=of.get("reduction", "mean"))
        return loss if of.get("reduction", "mean") == "mean" else loss.view(labels.shape)
    w = xs[1] if len(xs) > 1 else None
    if op == "layer_norm":
        return torch.nn.functional.layer_norm(x, x.shape[-1:], w, xs[2] if len(xs) > 2 else None, of["eps"])
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + of["eps"])  # rms_norm: torch 1.13 has none
    return y if w is None else y * w


def sdpa_reference(q, k, v, causal=False, gqa=False):
    """softmax(q @ kᵀ / √d) @ v: torch.nn.functional.scaled_dot_product_attention where the torch
    version has it (2.0 and later), else its math written out, as torch's own reference is; with
    causal, is_causal=True: query i sees keys 0 to i, the others' scores -inf (top-left aligned).
    With gqa (enable_gqa: k and v of fewer heads, dim -3), k and v are first repeated for the
    query heads of their group, as torch's enable_gqa does (repeat_interleave along dim -3), which
    the torch versions before 2.5 lack as an argument."""
    if gqa and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        seen = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~seen, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def with_scalar(o, xs, value):
    """xs with value in the slot of o's number operand (docs/plan.md, "ops"), xs when it has none."""
    sc = o.get("scalar")
    if sc is None:
        return list(xs)
    return list(xs[:sc["slot"]]) + [value] + list(xs[sc["slot"]:])


def scalar_log2(c):
    """log2 of a bound on a number operand: exact where it is an integer, else never exact."""
    if c == 0:
        return 0.0
    return math.log2(abs(c)) if float(c).is_integer() else _INF


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
    rounding = ROUNDING.get(op)
    if rounding == "additive":  # add, sub
        return max(lbs) + 1, sum(terms)
    if rounding == "selecting":  # maximum, minimum
        return max(lbs), max(terms)
    if rounding == "multiplicative":  # mul; square, x·x
        if len(lbs) == 1:
            lbs, terms = lbs * 2, terms * 2
        return sum(lbs), sum(terms) + 1
    if rounding in VALUE_BOUNDED:  # never exact: the magnitude is the error bound (Reference._bounded)
        return _INF, 1
    if op in INDEX_OPS:  # rows of the table: its values, summed with zeros only
        table = INDEX_OPS[op][1]
        return lbs[table], terms[table]
    if op == "scatter_add":  # the values' rows (operand 1), up to n of them summed into each row
        n = shapes[1][-2]
        return lbs[1] + math.log2(n), terms[1] * n
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



# --- process groups ----------------------------------------------------------

def make_groups(plan, cache):
    """One process group per distinct team of the plan's collectives, by its devices in
    ascending order, created on every rank in the same order (the whole job: the default group)."""
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
                groups[key] = dist.group.WORLD
                continue
            groups[key] = dist.new_group(ranks=list(key))
            if cache is not None:
                cache[key] = groups[key]
    return groups


class GlooDist:
    """torch.distributed as RUN calls it, on gloo: the collectives gloo lacks in older
    PyTorch (all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single) run
    through the list and all_reduce forms, and bfloat16 buffers move as float32
    copies (gloo has no bfloat16 reductions). Everything else is torch.distributed."""

    def __init__(self, real):
        self._d, self._slow = real, set()

    def __getattr__(self, name):
        return getattr(self._d, name)

    def _try(self, name, fast, slow):
        if name not in self._slow:
            try:
                return fast()
            except (RuntimeError, NotImplementedError, AttributeError, ValueError) as e:
                msg = str(e).lower()
                if "support" not in msg and "implement" not in msg:
                    raise
                self._slow.add(name)
        return slow()

    def all_gather_into_tensor(self, out, x, group=None):
        d, T = self._d, self._d.get_world_size(group)
        with _as_float(out, x) as (o, xf):
            self._try("all_gather_into_tensor", lambda: d.all_gather_into_tensor(o, xf, group=group),
                      lambda: d.all_gather(list(o.view(T, -1).unbind(0)), xf, group=group))

    def reduce_scatter_tensor(self, out, x, op=dist.ReduceOp.SUM, group=None):
        d, T = self._d, self._d.get_world_size(group)

        def slow(o, xf):
            buf = xf.clone()
            d.all_reduce(buf, op=op, group=group)
            o.copy_(buf.view(T, -1)[d.get_rank(group)])
        with _as_float(out, x) as (o, xf):
            self._try("reduce_scatter_tensor", lambda: d.reduce_scatter_tensor(o, xf, op=op, group=group),
                      lambda: slow(o, xf))

    def all_to_all_single(self, out, x, output_split_sizes=None, input_split_sizes=None, group=None):
        """With split sizes (an AllToAllV), a rank that sends nothing passes an empty input
        and one that receives nothing an empty output: the slow form gathers every rank's
        split sizes, then the inputs padded to the longest, and each rank keeps its chunks."""
        d, T = self._d, self._d.get_world_size(group)

        def slow(o, xf):
            me = d.get_rank(group)
            if input_split_sizes is None:
                every = torch.empty(T * xf.numel(), dtype=xf.dtype, device=xf.device)
                d.all_gather(list(every.view(T, -1).unbind(0)), xf, group=group)
                o.copy_(every.view(T, T, -1)[:, me].reshape(-1))
                return
            rows = torch.empty(T * T, dtype=torch.int64, device=xf.device)
            mine = torch.tensor(input_split_sizes, dtype=torch.int64, device=xf.device)
            d.all_gather(list(rows.view(T, T).unbind(0)), mine, group=group)
            rows = rows.view(T, T).tolist()
            n = max(sum(row) for row in rows)
            if n == 0:
                return
            padded = torch.zeros(n, dtype=xf.dtype, device=xf.device)
            padded[:xf.numel()] = xf
            every = torch.empty(T * n, dtype=xf.dtype, device=xf.device).view(T, n)
            d.all_gather(list(every.unbind(0)), padded, group=group)
            o.copy_(torch.cat([every[k][:sum(rows[k])].split(rows[k])[me] for k in range(T)]))

        def fast(o, xf):
            if input_split_sizes is None:
                return d.all_to_all_single(o, xf, group=group)
            return d.all_to_all_single(o, xf, output_split_sizes=output_split_sizes,
                                       input_split_sizes=input_split_sizes, group=group)
        with _as_float(out, x) as (o, xf):
            self._try("all_to_all_single", lambda: fast(o, xf), lambda: slow(o, xf))

    def all_reduce(self, x, op=dist.ReduceOp.SUM, group=None):
        with _as_float(x) as (xf,):
            self._d.all_reduce(xf, op=op, group=group)

    def broadcast(self, x, src, group=None):
        with _as_float(x) as (xf,):
            self._d.broadcast(xf, src=src, group=group)

    def reduce(self, x, dst, op=dist.ReduceOp.SUM, group=None):
        with _as_float(x) as (xf,):
            self._d.reduce(xf, dst=dst, op=op, group=group)

    def scatter(self, out, parts=None, src=0, group=None):
        with _as_float(out, *(parts or [])) as (o, *ps):
            self._d.scatter(o, ps if parts is not None else None, src=src, group=group)

    def gather(self, x, parts=None, dst=0, group=None):
        with _as_float(*(parts or []), x) as (*ps, xf):
            self._d.gather(xf, ps if parts is not None else None, dst=dst, group=group)

    def send(self, x, dst, group=None):
        with _as_float(x) as (xf,):
            self._d.send(xf, dst=dst, group=group)

    def recv(self, x, src, group=None):
        with _as_float(x) as (xf,):
            self._d.recv(xf, src=src, group=group)

    def isend(self, x, dst, group=None):
        """A send that does not block (a rank of a shift sends while it receives); a
        bfloat16 buffer goes as a float32 copy, kept until the send is waited for."""
        xf = x.float() if x.dtype == torch.bfloat16 else x
        return _Sending(self._d.isend(xf, dst=dst, group=group), xf)


class _Sending:
    """A non-blocking send and the buffer it reads, which must live until it completes."""

    def __init__(self, work, buffer):
        self.work, self.buffer = work, buffer

    def wait(self):
        self.work.wait()


class _as_float:
    """The tensors themselves, or, where they are bfloat16, float32 copies whose
    values are copied back on exit (into the first: the one a collective writes)."""

    def __init__(self, *ts):
        self.ts = ts
        self.bf = any(t.dtype == torch.bfloat16 for t in ts)

    def __enter__(self):
        self.fs = [t.float() for t in self.ts] if self.bf else list(self.ts)
        return self.fs

    def __exit__(self, *exc):
        if self.bf and exc[0] is None:
            for t, f in zip(self.ts, self.fs):
                t.copy_(f)
        return False


# --- checking --------------------------------------------------------------------

def fmt(v):
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 2 ** 63 else repr(v)


def check_op(plan, rank, ref, k, buf):
    """The first mismatch of op k's output on this rank (buf: its buffer there), as a dict, or None."""
    name = plan.p["ops"][k]["output"]
    shard = plan.shards[name]
    if rank not in shard.mesh["devices"]:
        return None
    offs = shard.offsets(rank, ref.dev)
    mis = {"op": k, "step": plan.p["steps"][plan.last[k]]["id"], "tensor": name, "device": rank,
           "flat_index": -1, "logical_index": None, "expected": offs.numel(), "actual": 0}
    if buf is None:
        mis["reason"] = 'device %d holds no buffer "%s"' % (rank, name)
        return mis
    if buf.numel() != offs.numel():
        mis["actual"] = buf.numel()
        mis["reason"] = "size: the buffer has %d elements, the shard has %d" % (buf.numel(), offs.numel())
        return mis
    want = ref.val[name][offs]
    got = buf.to(device=ref.dev, dtype=torch.float64)
    bad = ~((got == want) | ((got - want).abs() <= ref.tolerance(name, offs)))  # inf: exactly
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


def check_terms(plan, ref, k, per_rank):
    """The first mismatch of op k's output, pending terms (docs/simulate.md, "Pending terms"):
    the terms gathered from every rank, those two ranks hold equal, and their reduction
    compared with the reference of the op's values."""
    name = plan.p["ops"][k]["output"]
    shard = plan.shards[name]
    n = math.prod(shard.shape)
    vals = torch.zeros(n, dtype=torch.float64, device=ref.dev)
    have = torch.zeros(n, dtype=torch.bool, device=ref.dev)
    base = {"op": k, "step": plan.p["steps"][plan.last[k]]["id"], "tensor": name, "device": -1,
            "flat_index": -1, "logical_index": None, "expected": 0, "actual": 0}
    for d in shard.mesh["devices"]:
        got, offs = per_rank[d].get(("terms", k)), shard.offsets(d, ref.dev)
        if got is None:
            return dict(base, device=d, expected=offs.numel(), reason='device %d holds no buffer "%s"' % (d, name))
        got = torch.tensor(got, dtype=torch.float64, device=ref.dev)
        if got.numel() != offs.numel():
            return dict(base, device=d, expected=offs.numel(), actual=got.numel(),
                        reason="size: the buffer has %d elements, the shard has %d" % (got.numel(), offs.numel()))
        clash = have[offs] & (vals[offs] != got)
        if bool(clash.any()):
            i = int(clash.nonzero()[0, 0])
            return dict(base, device=d, flat_index=i, logical_index=shard.unflatten(int(offs[i])), expected=float(vals[offs[i]]),
                        actual=float(got[i]), reason="two devices hold this term with different values")
        vals[offs], have[offs] = got, True
    if not bool(have.all()):
        return dict(base, logical_index=shard.unflatten(int((~have).nonzero()[0, 0])), reason="no device holds this term")
    op = plan.tensors[name]["partial"]
    got, want = reduce_dims(op, vals.view(shard.shape), [0]).reshape(-1), ref.val[name]
    every = torch.arange(want.numel(), device=ref.dev)
    bad = ~((got - want).abs() <= ref.tolerance(name, every))
    if not bool(bad.any()):
        return None
    i = int(bad.nonzero()[0, 0])
    rest = i
    index = []
    for e in reversed(shard.shape[1:]):
        index.insert(0, rest % e)
        rest //= e
    return dict(base, logical_index=index, expected=float(want[i]), actual=float(got[i]),
                reason="the %s of its pending terms differs" % op)


def first_mismatch(plan, per_rank, ref=None):
    """The mismatch simulate would report: the earliest op, the first device in mesh order."""
    for k, o in enumerate(plan.p["ops"]):
        if "within" in o:
            continue  # computed within another op's steps: no rank holds its output
        if k not in plan.last:
            return {"op": k, "step": -1, "tensor": o["output"], "device": -1, "flat_index": -1,
                    "logical_index": None, "expected": 0, "actual": 0,
                    "reason": "no step implements op %d (%s)" % (k, o["op"])}
        if o["output"] in plan.pending:
            m = check_terms(plan, ref, k, per_rank)
            if m is not None:
                return m
            continue
        for d in plan.shards[o["output"]].mesh["devices"]:
            m = per_rank[d].get(k)
            if m is not None:
                return m
    return None


def scaled(plan, name):
    """Whether input name's data is simulate's times 2^-DATA_SCALE: a floating-point input
    that no lookup reads as its indices."""
    return DATA_SCALE > 0 and not plan.bounds.get(name, 0) and DTYPES[plan.tensors[name]["dtype"]].is_floating_point


def check_data(plan, seed, dev):
    """Compares the generated data with the values `nvcomm simulate` uses (PROBES)."""
    if seed != DEFAULT_SEED:
        return "not checked (seed %d; the program embeds simulate's values for seed %d)" % (seed, DEFAULT_SEED)
    data = data_set(plan.p)
    for name, want in sorted(PROBES.items()):
        got = input_data(seed, plan.index[name], len(want), data, dev, plan.bounds.get(name, 0)).tolist()
        if got != [float(v) for v in want]:
            return "DIFFERS from simulate for %s: %r, simulate %r" % (name, got[:8], want[:8])
    same = "same as simulate (%d values of %d inputs)" % (sum(len(v) for v in PROBES.values()), len(PROBES))
    if DATA is not None:
        same += ", of its %s data set" % DATA
    if DATA_SCALE > 0:
        same += ", the floating-point inputs times 2^-%d" % DATA_SCALE
    return same


def check_autograd(plan, seed, dev):
    """The gradients of the fusion's backward (every input t with a t.grad), as the plan's
    ops compute them in the float64 reference, against torch.autograd's of the forward on the
    unsharded values: the forward's composites run as torch's own functions (composite_reference:
    torch.nn.functional.scaled_dot_product_attention, layer_norm, cross_entropy, ...), its other
    ops as the reference runs them, and torch.autograd.grad differentiates the seeds' values (the
    forward tensors s whose s.grad the backward starts from) against s.grad's reference values.
    An independent check of nvcomm's gradient rules: a rule that differs from torch's derivative
    fails here, before any rank's value is compared. "" when the plan has no backward."""
    p = plan.p
    wrt = [n for n in plan.inputs if grad_name(n) in plan.produced and DTYPES[plan.tensors[n]["dtype"]].is_floating_point]
    if not wrt:
        return ""
    # The backward's ops, and the sets and reductions inserted for them (before or after).
    backward = {k for k, o in enumerate(p["ops"]) if (o.get("of") or {}).get("grad")}
    while True:
        more = {k for k, o in enumerate(p["ops"]) if (o.get("inserted") or {}).get("for") in backward} - backward
        if not more:
            break
        backward |= more
    forward = [o for k, o in enumerate(p["ops"]) if k not in backward]
    read = {n for o in forward for n in operands(o)}
    # A seed: a forward output no forward op reads, or one whose gradient the backward takes
    # from no other gradient (a pipeline's tokens' losses, seeded by an input: tok_loss.grad =
    # set(dloss), while the sums of the step's loss read tok_loss).
    made = {o["output"]: o for k, o in enumerate(p["ops"]) if k in backward}
    def seeded(n):
        g = made.get(grad_name(n))
        return g is not None and not any(".grad" in x for x in operands(g))
    seeds = [o["output"] for o in forward if grad_name(o["output"]) in plan.produced and (o["output"] not in read or seeded(o["output"]))]
    if not seeds:
        return "not checked: no forward output starts the backward"
    ref = Reference(plan, seed, dev)
    val = {n: ref.val[n].view(ref.value_shape(n)).detach().clone().requires_grad_(n in wrt) for n in plan.inputs}
    with torch.enable_grad():
        for o in forward:
            names, out, of = operands(o), o["output"], o.get("of")
            if of is None and (o.get("inserted") or {}).get("for") is not None:
                # A set inserted for an op of a composite's expansion is of the expansion too
                # (nvFuser's policy reshards the loss's gathered logits by one).
                of = p["ops"][o["inserted"]["for"]].get("of")
            if of is not None and out != of["output"]:
                continue  # a composite's expansion: torch's function computes it whole, at its output
            if of is not None:
                y = composite_reference(of, [val[n] for n in of["inputs"]])
            elif o["op"] in REDUCE_OPS and names[0] in plan.pending:
                y = val[names[0]]  # the reduction of pending terms: their value already
            else:
                xs = with_scalar(o, [val[n] for n in names], ref._scalar(o))
                y = apply_op(o, xs, ref.value_shape(out))
            val[out] = y.reshape(ref.value_shape(out))
        outs = [val[s] for s in seeds]
        dys = [ref.val[grad_name(s)].view(ref.value_shape(grad_name(s))) for s in seeds]
        if any(list(y.shape) != list(dy.shape) for y, dy in zip(outs, dys)):
            return "not checked: a seed's gradient has another shape than the seed"
        got = torch.autograd.grad(outs, [val[n] for n in wrt], dys, allow_unused=True)
    for n, g in zip(wrt, got):
        want = ref.val[grad_name(n)].view(ref.value_shape(grad_name(n)))
        g = torch.zeros_like(want) if g is None else g
        scale = float(g.abs().max()) if g.numel() else 0.0
        if list(g.shape) != list(want.shape) or not torch.allclose(want, g, rtol=1e-9, atol=1e-9 * (1 + scale)):
            i = int((want.reshape(-1) - g.reshape(-1)).abs().argmax()) if g.shape == want.shape else 0
            return "DIFFERS from torch.autograd for %s: element %d is %s by nvcomm's rules, %s by torch.autograd" % (
                grad_name(n), i, fmt(want.reshape(-1)[i]), fmt(g.reshape(-1)[i]))
    return "%s (%s) equal%s torch.autograd's of the unsharded forward" % (
        "1 gradient" if len(wrt) == 1 else "%d gradients" % len(wrt), ", ".join(grad_name(n) for n in wrt),
        "s" if len(wrt) == 1 else "")


def grad_name(n):
    """The gradient of tensor n: n.grad, or b.grad@mb for a micro-batch's copy b@mb of a pipeline."""
    base, at, mb = n.partition("@")
    return base + ".grad" + at + mb


# --- timing ------------------------------------------------------------------------

# The comment that opens a block of RUN: "# step 3 (Allgather): ..." or "# steps 2-3 (Permute + Unpad): ...".
BLOCK = re.compile(r"#\s*steps?\s+(\d+)(?:-(\d+))?\s+\(([^)]*)\)")


def code_blocks(fn):
    """fn's body cut at its block comments: the statements before the first block
    (compiled), and each block's (first step, last step, types, compiled statements)."""
    src = textwrap.dedent(inspect.getsource(fn))
    lines = src.splitlines()
    marks = [(i + 1, m) for i, line in enumerate(lines) for m in [BLOCK.match(line.strip())] if m]
    pre, blocks = [], [[int(m.group(1)), int(m.group(2) or m.group(1)), m.group(3), []] for _, m in marks]
    for st in ast.parse(src).body[0].body:
        if isinstance(st, ast.Return) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue  # the docstring and the return statement
        owner = [k for k, (line, _) in enumerate(marks) if line < st.lineno]
        (blocks[owner[-1]][3] if owner else pre).append(st)

    def compiled(stmts):
        return compile(ast.Module(body=stmts, type_ignores=[]), "<%s>" % fn.__name__, "exec")
    return compiled(pre), [(a, b, t, compiled(s)) for a, b, t, s in blocks]


def bench(ctx, args, inputs):
    """Median seconds of each block of RUN on this rank (0 where it takes no part), and
    of one call of RUN. Each block is timed alone: its statements run again and again
    on the buffers a first run of the blocks before it left (so it times exactly the
    code RUN shows)."""
    try:
        pre, blocks = code_blocks(RUN)
    except (OSError, TypeError, SyntaxError) as e:  # no source at hand: time the whole call only
        print("nvcomm bench: cannot read %s's source (%s): timing the whole call only" % (RUN.__name__, e), file=sys.stderr)
        pre, blocks = None, []
    mine = ctx.rank in ctx.plan.devices()
    ns = dict(RUN.__globals__)  # one namespace: RUN's globals and its arguments
    ns.update(zip(inspect.signature(RUN).parameters, [ctx.rank, ctx.dev, ctx.groups] + inputs))
    if mine and pre is not None:
        exec(pre, ns)
    times = []
    for _, _, _, code in blocks:
        barrier(ctx)
        if not mine:
            times.append(0.0)
            continue
        def fn(code=code):
            exec(code, ns)
        for _ in range(max(args.warmup, 1)):
            fn()
        times.append(time_calls(ctx.dev, fn, args.bench, args.timing))
    barrier(ctx)
    whole = 0.0
    if mine:
        def call():
            RUN(ctx.rank, ctx.dev, ctx.groups, *inputs)
        for _ in range(args.warmup):
            call()
        whole = time_calls(ctx.dev, call, args.bench, args.timing)
    barrier(ctx)
    return [(a, b, t) for a, b, t, _ in blocks], times, whole


def barrier(ctx):
    if ctx.backend == "nccl":
        dist.barrier(device_ids=[ctx.dev.index])
    else:
        dist.barrier()


def bench_report(blocks, times, whole, out):
    """Prints and returns the measured and predicted time of every block and of RUN."""
    rows = []
    lines = ["block  steps  type                   measured (us)  predicted (us)  measured/predicted"]
    us = lambda s: "-" if s is None else "%.1f" % (s * 1e6)
    for k, ((a, b, types), t) in enumerate(zip(blocks, times)):
        pred = PREDICTED[k] if PREDICTED and k < len(PREDICTED) else None
        steps = str(a) if a == b else "%d-%d" % (a, b)
        lines.append("%-6d %-6s %-22s %13.1f  %14s  %s" % (k, steps, types, t * 1e6, us(pred), "%.2f" % (t / pred) if pred else "-"))
        rows.append({"block": k, "step": a, "steps": list(range(a, b + 1)), "type": types.replace(" ", ""),
                     "measured_s": t, "predicted_s": pred})
    ptotal = sum(PREDICTED) if PREDICTED else None
    lines.append("%-36s %13.1f  %14s" % ("sum of blocks", sum(times) * 1e6, us(ptotal)))
    lines.append("%-36s %13.1f  %14s  %s" % ("one call of %s" % RUN.__name__, whole * 1e6, us(ptotal),
                                             "%.2f" % (whole / ptotal) if ptotal else "-"))
    print("\n".join(lines), file=out)
    return rows


# --- main ----------------------------------------------------------------------------

class Context:
    """One rank: its device, backend and process groups."""

    def __init__(self, plan, rank, dev, backend, groups):
        self.plan, self.rank, self.dev, self.backend, self.groups = plan, rank, dev, backend, groups


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Run nvcomm plan %r on torch.distributed and check it." % PLAN["fusion"])
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="process group backend (default: nccl when CUDA is available, else gloo)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the input data (as nvcomm simulate --seed)")
    ap.add_argument("--bench", type=int, default=0, metavar="N",
                    help="time every block of %s and one call of it: median of N runs after --warmup" % RUN.__name__)
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
    if backend == "gloo" and not isinstance(RUN.__globals__["dist"], GlooDist):
        RUN.__globals__["dist"] = GlooDist(dist)
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    say = (lambda *a: print(*a, file=out, flush=True)) if rank == 0 else (lambda *a: None)
    try:
        plan = Plan(PLAN)
    except PlanError as e:
        say("error: %s" % e)
        return 1
    need = max(plan.devices()) + 1
    if world < need:
        say("error: the plan uses devices up to %d: run it with at least %d processes (torchrun --nproc_per_node=%d), got %d" % (need - 1, need, need, world))
        return 2
    say("plan %s: %d steps on devices %s; %d ranks, backend %s, seed %d" % (
        PLAN["fusion"], len(PLAN["steps"]), sorted(plan.devices()), world, backend, args.seed))
    ctx = Context(plan, rank, dev, backend, make_groups(plan, group_cache))
    data = check_data(plan, args.seed, dev) if rank == 0 else ""
    say("data: %s" % data)
    try:
        grads = check_autograd(plan, args.seed, dev) if rank == 0 else ""
    except PlanError as e:
        grads = "not checked: %s" % e
    if grads:
        say("autograd: %s" % grads)
    try:
        mine, inputs = execute(ctx, args.seed) if rank in plan.devices() else ({}, [])
    except PlanError as e:  # the reference's: every rank of the plan raises it before RUN
        mine, inputs = {"error": str(e)}, []
    every = [None] * world
    dist.all_gather_object(every, mine)
    errors = [m["error"] for m in every if "error" in m]
    if errors:
        say("error: %s" % errors[0])
        return 1
    result = {"plan": PLAN["fusion"], "backend": backend, "world_size": world, "seed": args.seed,
              "data": data, "pass": False, "mismatch": None, "steps": []}
    ref = Reference(plan, args.seed, dev) if plan.pending else None
    m = first_mismatch(plan, every, ref)
    result["mismatch"], result["pass"] = m, m is None and not data.startswith("DIFFERS") and not grads.startswith("DIFFERS")
    result["autograd"] = grads
    say("PASS" if result["pass"] else "FAIL: %s" % (describe(m) if m else "data " + data if data.startswith("DIFFERS") else "autograd " + grads))
    if args.bench:
        blocks, times, whole = bench(ctx, args, inputs)
        t = torch.tensor(times + [whole], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's
        if rank == 0:
            t = t.tolist()
            result["steps"] = bench_report(blocks, t[:-1], t[-1], out)
            result["call_s"], result["predicted_s"] = t[-1], sum(PREDICTED) if PREDICTED else None
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0 if result["pass"] else 1


def execute(ctx, seed):
    """Builds this rank's input shards, calls RUN and checks every op's output.
    Returns the mismatches by op, and the inputs (for --bench)."""
    plan = ctx.plan
    ref = Reference(plan, seed, ctx.dev)
    inputs = []
    for name in plan.inputs:
        shard = plan.shards[name]
        buf = None
        if ctx.rank in shard.mesh["devices"]:
            buf = ref.val[name][shard.offsets(ctx.rank, ctx.dev)].to(DTYPES[plan.tensors[name]["dtype"]])
        inputs.append(buf)
    outs = RUN(ctx.rank, ctx.dev, ctx.groups, *inputs)
    found = {}
    for k, o in enumerate(plan.p["ops"]):
        if k in plan.last and o["output"] in plan.pending:
            # Checked once every rank's terms are gathered (check_terms).
            buf = outs.get(o["output"])
            if ctx.rank in plan.shards[o["output"]].mesh["devices"] and buf is not None:
                found[("terms", k)] = buf.to(torch.float64).reshape(-1).cpu().tolist()
        elif k in plan.last:
            m = check_op(plan, ctx.rank, ref, k, outs.get(o["output"]))
            if m is not None:
                found[k] = m
    return found, inputs


if __name__ == "__main__":
    sys.exit(main())
