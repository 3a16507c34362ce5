"""A pass plugin: rewrites ``x * 2.0`` into ``x + x`` in TTIR.

Loaded by naming this module in ``NAIAD_PASS_PLUGINS`` (the folder must be importable); at
import it registers the pass as "double-to-add".  See ``insert_pass.py`` for running it.
"""

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from naiad.ir import arith
from naiad.passes import register_pass
from naiad.passes.constants import splat_value
from naiad.passes.rewrite import apply_patterns


class _DoubleToAdd(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.MulfOp, rewriter: PatternRewriter) -> None:
        for x, factor in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if splat_value(factor) == 2.0:
                rewriter.replace(op, arith.AddfOp(x, x))
                return


register_pass("double-to-add", lambda module: apply_patterns(module, [_DoubleToAdd()]))
