"""ctx.state tests: one contract suite over every backend."""
