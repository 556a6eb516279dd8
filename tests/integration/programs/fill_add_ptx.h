// The PTX module the test programs load with cuModuleLoadData for kernels whose pointer parameters
// the recorder reads at each launch:
//   fill(.u64 ptr, .u32 n, .f32 value): ptr[0..n) = value, a grid-stride loop (any grid);
//   add(.u64 a, .u64 b, .u64 out, .u32 n): out[i] = a[i] + b[i], one element per thread.
#pragma once

inline constexpr char kFillAddPtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry fill(
	.param .u64 fill_param_0,
	.param .u32 fill_param_1,
	.param .f32 fill_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [fill_param_0];
	ld.param.u32 	%r2, [fill_param_1];
	ld.param.f32 	%f1, [fill_param_2];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	mov.u32 	%r6, %nctaid.x;
	mul.lo.s32 	%r7, %r6, %r4;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	$L__fill_done;
$L__fill_loop:
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.f32 	[%rd4], %f1;
	add.s32 	%r1, %r1, %r7;
	setp.lt.u32 	%p2, %r1, %r2;
	@%p2 bra 	$L__fill_loop;
$L__fill_done:
	ret;
}

.visible .entry add(
	.param .u64 add_param_0,
	.param .u64 add_param_1,
	.param .u64 add_param_2,
	.param .u32 add_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [add_param_0];
	ld.param.u64 	%rd2, [add_param_1];
	ld.param.u64 	%rd3, [add_param_2];
	ld.param.u32 	%r2, [add_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	$L__add_done;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.u32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;
$L__add_done:
	ret;
}
)";
