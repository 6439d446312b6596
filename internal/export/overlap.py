# ---------------------------------------------------------------------------
# nvcomm runtime, step graphs (internal/export/overlap.py): what a program of a
# plan of format 2 adds to the runtime above. RUN issues every collective with
# async_op=True and waits where the plan's graph says (docs/overlap.md), so on
# gloo GlooDist must return work handles: AsyncGlooDist below replaces it. And
# --bench times a block to the end of the communication it starts.
# ---------------------------------------------------------------------------

# NVCOMM_DELIVER_AT_WAIT=1 (gloo): a collective's outputs read NaN (an integer
# dtype's smallest value) from its issue until RUN waits for it, and only then
# hold what it received, so that a read the graph does not order after its
# write fails the check whatever the timing (docs/overlap.md, "Export").
DELIVER_AT_WAIT = os.environ.get("NVCOMM_DELIVER_AT_WAIT", "") not in ("", "0")


def _poison(t):
    t.fill_(float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).min)


class _Pending:
    """A collective in flight on gloo: its work handles and what must follow them
    (bfloat16 values copied back, a slow form's last copy), done once, at wait."""

    def __init__(self, works, finish=None):
        self.works, self.finish = [w for w in works if w is not None], finish

    def wait(self):
        for w in self.works:
            w.wait()
        self.works = []
        if self.finish is not None:
            finish, self.finish = self.finish, None
            finish()
        return True


class _Staged:
    """The buffers a collective writes (writes) and reads (reads) as gloo takes them:
    bfloat16 ones as float32 copies (gloo has no bfloat16 reductions), and, with
    DELIVER_AT_WAIT, the written ones as copies, the buffers themselves poisoned until
    done() copies the values back."""

    def __init__(self, writes=(), reads=()):
        self.back = []
        self.w = []
        for t in writes:
            if t.dtype == torch.bfloat16 or DELIVER_AT_WAIT:
                s = t.float() if t.dtype == torch.bfloat16 else t.clone()
                self.back.append((t, s))
                self.w.append(s)
            else:
                self.w.append(t)
        self.r = [t.float() if t.dtype == torch.bfloat16 else t for t in reads]
        if DELIVER_AT_WAIT:
            for t, _ in self.back:
                _poison(t)

    def done(self):
        for t, s in self.back:
            t.copy_(s)


class AsyncGlooDist(GlooDist):
    """GlooDist whose collectives take async_op and then return a handle whose wait
    also finishes what GlooDist does after the call (copies back, a slow form's
    copy); called without it, each waits at once, as GlooDist's do."""

    def _issue(self, async_op, st, start, finish=None):
        """start() issues the call (async) and returns its work handles; the handle
        returned waits for them, runs finish, then copies st's buffers back."""
        def end():
            if finish is not None:
                finish()
            st.done()
        h = _Pending(start(), end)
        if async_op:
            return h
        h.wait()
        return None

    def all_gather_into_tensor(self, out, x, group=None, async_op=False):
        d, T = self._d, self._d.get_world_size(group)
        st = _Staged([out], [x])
        (o,), (xf,) = st.w, st.r
        return self._issue(async_op, st, lambda: [self._try(
            "all_gather_into_tensor", lambda: d.all_gather_into_tensor(o, xf, group=group, async_op=True),
            lambda: d.all_gather(list(o.view(T, -1).unbind(0)), xf, group=group, async_op=True))])

    def reduce_scatter_tensor(self, out, x, op=dist.ReduceOp.SUM, group=None, async_op=False):
        d, T = self._d, self._d.get_world_size(group)
        st = _Staged([out], [x])
        (o,), (xf,) = st.w, st.r
        buf, slow = [], [False]

        def start_slow():
            slow[0] = True
            buf.append(xf.clone())
            return d.all_reduce(buf[0], op=op, group=group, async_op=True)

        def finish():
            if slow[0]:
                o.copy_(buf[0].view(T, -1)[d.get_rank(group)])
        return self._issue(async_op, st, lambda: [self._try(
            "reduce_scatter_tensor", lambda: d.reduce_scatter_tensor(o, xf, op=op, group=group, async_op=True),
            start_slow)], finish)

    def all_to_all_single(self, out, x, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
        st = _Staged([out])
        (o,) = st.w

        def start():  # GlooDist's own call, into the staged buffer; its slow form waits at once
            # super(), not GlooDist: the module rebinds that name to this class below.
            super(AsyncGlooDist, self).all_to_all_single(o, x, output_split_sizes=output_split_sizes,
                                                         input_split_sizes=input_split_sizes, group=group)
            return []
        return self._issue(async_op, st, start)

    def all_reduce(self, x, op=dist.ReduceOp.SUM, group=None, async_op=False):
        st = _Staged([x])
        return self._issue(async_op, st, lambda: [self._d.all_reduce(st.w[0], op=op, group=group, async_op=True)])

    def broadcast(self, x, src, group=None, async_op=False):
        root = self._d.get_rank() == src  # the root's buffer is its input: read, never written
        st = _Staged([] if root else [x], [x] if root else [])
        xf = (st.r if root else st.w)[0]
        return self._issue(async_op, st, lambda: [self._d.broadcast(xf, src=src, group=group, async_op=True)])

    def reduce(self, x, dst, op=dist.ReduceOp.SUM, group=None, async_op=False):
        st = _Staged([x])
        return self._issue(async_op, st, lambda: [self._d.reduce(st.w[0], dst=dst, op=op, group=group, async_op=True)])

    def scatter(self, out, parts=None, src=0, group=None, async_op=False):
        st = _Staged([out], parts or [])
        ps = st.r if parts is not None else None
        return self._issue(async_op, st, lambda: [self._d.scatter(st.w[0], ps, src=src, group=group, async_op=True)])

    def gather(self, x, parts=None, dst=0, group=None, async_op=False):
        st = _Staged(parts or [], [x])
        ps = st.w if parts is not None else None
        return self._issue(async_op, st, lambda: [self._d.gather(st.r[0], ps, dst=dst, group=group, async_op=True)])

    def isend(self, x, dst, group=None):
        st = _Staged([], [x])
        return self._issue(True, st, lambda: [self._d.isend(st.r[0], dst=dst, group=group)])

    def irecv(self, x, src, group=None):
        st = _Staged([x])
        return self._issue(True, st, lambda: [self._d.irecv(st.w[0], src=src, group=group)])


GlooDist = AsyncGlooDist  # noqa: F811  (run() wraps torch.distributed in GlooDist on gloo)


def code_blocks(fn, _plain=code_blocks):  # noqa: F811
    """The runtime's code_blocks, each block followed by a wait for the communication it
    started (settle), so that --bench times a block to its end, not to its issue."""
    src = textwrap.dedent(inspect.getsource(fn))
    settle = ast.parse("settle(work, device)").body
    pre, blocks = _plain(fn)
    body = ast.parse(src).body[0].body
    lines = src.splitlines()
    marks = [i + 1 for i, line in enumerate(lines) if BLOCK.match(line.strip())]
    stmts = [[] for _ in marks]
    for st in body:
        if isinstance(st, ast.Return) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue
        owner = [k for k, line in enumerate(marks) if line < st.lineno]
        if owner:
            stmts[owner[-1]].append(st)

    def compiled(s):
        return compile(ast.Module(body=s + settle, type_ignores=[]), "<%s>" % fn.__name__, "exec")
    return pre, [(a, b, t, compiled(s)) for (a, b, t, _), s in zip(blocks, stmts)]


def bench_report(blocks, times, whole, out, _plain=bench_report):  # noqa: F811
    """The runtime's report, and one call against the plan's makespan (MAKESPAN): the
    steps overlap, so one call takes less than the sum of its blocks."""
    rows = _plain(blocks, times, whole, out)
    if MAKESPAN:
        print("%-36s %13.1f  %14.1f  %.2f" % ("one call against the makespan", whole * 1e6, MAKESPAN * 1e6,
                                             whole / MAKESPAN), file=out)
    return rows
