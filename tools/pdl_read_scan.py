#!/usr/bin/env python3
# Reads before the programmatic-dependent-launch wait, found in SASS.
#
# Usage: python3 tools/pdl_read_scan.py build/libb12x.so
#
# A kernel launched with PDL may start while its predecessor still writes; it must not read what
# the predecessor writes before `griddepcontrol.wait` (SASS: ACQBULK). ptxas may hoist
# `ld.global.nc` loads above ACQBULK (session 27: the IQ2_XS integer-MMA GEMV's activation loads),
# so the source order proves nothing: this checks the SASS. For every sm_90a kernel with an
# ACQBULK it follows, in address order up to the first ACQBULK, the registers derived from the
# parameter fields the predecessor may write (FAM below) and prints every global load whose
# address comes from one. Heuristic: straight-line, no control flow (a load in a branch that does
# not run before the wait is still printed); each hit needs a read of the kernel. Reads of these
# fields before the wait that are there by design: MoE FC2's routes (written two launches back;
# FC1 triggers only after its own wait), attention's metadata and page-table entries under
# `kv_prefix_stable` (docs/attention.md, docs/moe.md).
import collections, re, shutil, subprocess, sys
cu = shutil.which('cuobjdump') or '/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/cuobjdump'
# Kernel parameter offsets (sm_90 parameter bank starts at 0x210) of the pointers a kernel's
# predecessor in the stream may write: LinearParams x / xscale / xq_scale, DecodeArgs ids /
# topk_weights / x / xq / inter, PagedParams q / page_table / seqlens / cu_q / part_o / part_lse /
# tile_start.
FAM = [('LinearParams', '250|268|310'), ('DecodeArgs', '210|230|338|350|358'),
       ('PagedParams', '210|230|238|240|268|270|278')]
out = subprocess.run([cu, '-sass', '-arch', 'sm_90a', sys.argv[1]], capture_output=True, text=True).stdout
funcs = re.split(r'\n\s*Function : ', out)
def regs(s):
    r = set()
    for m in re.finditer(r'\b(U?R)(\d+)(\.64)?', s):
        k, n, w = m.group(1), int(m.group(2)), m.group(3)
        r.add(f'{k}{n}')
        if w: r.add(f'{k}{n+1}')
    return r
hits = collections.Counter(); ex = {}
for f in funcs[1:]:
    name = f.split('\n', 1)[0].strip()
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);', f)]
    first = next((a for a, t in ins if 'ACQBULK' in t), None)
    if first is None: continue
    dname = subprocess.run(['c++filt', name], capture_output=True, text=True).stdout.strip() if shutil.which('c++filt') else name
    offs = next((o for tag, o in FAM if tag in dname), None)
    if offs is None: continue
    pat = re.compile(r'c\[0x0\]\[0x(' + offs + r')\]')
    taint = set(); bad = []
    for a, t in ins:
        if a >= first: break
        body = re.sub(r'^@!?U?P\w+\s+', '', t)
        op, _, args = body.partition(' ')
        parts = [x.strip() for x in args.split(',')]
        if not parts or not parts[0]: continue
        dst, srcs = parts[0], ','.join(parts[1:])
        if op.startswith(('ST', 'RED', 'ATOM')) : continue
        if op.startswith('LDG'):
            if regs(srcs) & taint: bad.append(t)
            continue
        src_t = bool(pat.search(srcs)) or bool(regs(srcs) & taint)
        if src_t: taint |= regs(dst)
        else: taint -= regs(dst)
    if bad:
        d = dname
        k = re.sub(r'<.*', '', d); hits[k] += 1; ex.setdefault(k, []).append((d[:170], bad[:2]))
for k, v in hits.items():
    print(f'{v} kernels: {k}')
    for e in ex[k][:4]: print('   ', e)
print(f'scanned {len(funcs) - 1} functions; families with hits: {len(hits)}')
