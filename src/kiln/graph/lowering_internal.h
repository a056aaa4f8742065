// Per-op-group lowering functions, shared by lowering.cc only. Each returns false when the
// op is not in its group. Pointers (step.in/out) are filled by lower_node before the call.
#pragma once
#include "kiln/graph/lowering.h"

namespace kiln::graph::lowering {

bool lower_elementwise(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_gemm(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_attention(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_collective(const LowerContext& ctx, const Node& node, Lowered& l);

// A kernel entry point: the step (pointers, state, scratch) and its family's arguments.
template <typename Args>
using KernelFn = void (*)(const Step& step, const Args& args, const kernels::ExecContext& ctx);

template <typename Args>
Args args_of(KernelFn<Args>);  // declared only: names the Args a kernel function reads

// Step::run for kernel `Fn`: reads back the argument struct set_kernel<Fn> stored. Fn is a
// template argument, so it is called directly (inlined): no call beyond Step::run itself.
template <auto Fn>
void run_with_args(const Step& step, const kernels::ExecContext& ctx) {
  using Args = decltype(args_of(Fn));
  Fn(step, step.args.get<Args>(), ctx);
}

// Makes `step` run kernel `Fn` with `args`. The argument type is the one Fn's signature
// names, so a kernel can only ever read the struct its lowering wrote.
template <auto Fn>
void set_kernel(Step& step, const decltype(args_of(Fn))& args) {
  step.args.set(args);
  step.run = &run_with_args<Fn>;
}

}  // namespace kiln::graph::lowering
