// The user's line first (report/stacks/user_frames.h): which frames are the user's code, the via
// line of hand-built PyTorch and native stacks, C++ names shortened, grouping by the user's line
// and what `--stacks full` leaves out.
#include "report/stacks/user_frames.h"

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/python_stacks.h"

namespace gpumem::report {
namespace {

constexpr char kTorchLib[] = "/venv/lib/python3.12/site-packages/torch/lib/";
constexpr char kTorchPy[] = "/venv/lib/python3.12/site-packages/torch/";

Frame Native(const std::string& module, const std::string& function = "",
             const std::string& file = "", int line = 0) {
  Frame frame;
  frame.module = module;
  frame.function = function;
  frame.file = file;
  frame.line = line;
  frame.module_offset = 0x1234;
  return frame;
}

Frame Python(const std::string& file, int line, const std::string& function) {
  Frame frame;
  frame.python = true;
  frame.file = file;
  frame.line = line;
  frame.function = function;
  return frame;
}

TEST(UserFramesTest, NativeModulesOutsideSystemAndFrameworkLocationsAreTheUsers) {
  for (const char* module : {"/home/u/build/bin/leak_loop", "/opt/app/lib/libmodel.so",
                             "/work/build/tests/integration/programs/alloc_loop"}) {
    EXPECT_TRUE(IsUserModule(module)) << module;
  }
  for (const char* module :
       {"", "[vdso]", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2",
        "/usr/local/cuda-12.4/lib64/libcublas.so.12", "/opt/nvidia/nsight/libfoo.so",
        "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
        "/usr/local/lib/python3.12/dist-packages/cupy/core.so", "/usr/bin/python3.12",
        "/opt/conda/bin/python3", "/opt/conda/lib/libpython3.12.so.1.0",
        // The standard library's extension modules and a Python distribution's own libraries.
        "/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_ctypes.cpython-311.so",
        "/home/u/miniconda3/envs/train/lib/libffi.so.8",
        // The test suite's fake CUDA and gpumem's own library live in the build tree.
        "/work/build/tests/fake_cuda/libcuda.so.1", "/work/build/tests/fake_cuda/libcudart.so.12",
        "/work/build/lib/libgpumem_preload.so", "/home/u/nccl/build/lib/libnccl.so.2",
        "/home/u/lib/libcudnn_ops.so.9", "/home/u/lib/libcupti.so", "/home/u/lib/libnvrtc.so",
        "/home/u/gcc/lib64/libstdc++.so.6"}) {
    EXPECT_FALSE(IsUserModule(module)) << module;
  }
  EXPECT_TRUE(IsUserFrame(Python("/home/u/train.py", 3, "main")));
  EXPECT_FALSE(IsUserFrame(Python(std::string(kTorchPy) + "nn/modules/linear.py", 1, "f")));
  EXPECT_FALSE(IsUserFrame(Python("<frozen runpy>", 1, "_run_code")));
}

TEST(UserFramesTest, TemplateArgumentsAndParameterListsAreShortened) {
  EXPECT_EQ(ShortCppName("std::vector<int, std::allocator<int> >::push_back(int const&)"),
            "std::vector<…>::push_back(…)");
  EXPECT_EQ(ShortCppName("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::"
                         "WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor "
                         "(at::Tensor const&), &at::f>, at::Tensor, c10::guts::typelist::"
                         "typelist<at::Tensor const&> >, at::Tensor (at::Tensor const&)>::call("
                         "c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)"),
            "c10::impl::wrap_kernel_functor_unboxed_<…>::call(…)");
  EXPECT_EQ(ShortCppName("leak_iteration()"), "leak_iteration()");
  EXPECT_EQ(ShortCppName("(anonymous namespace)::Grow(unsigned long) const"),
            "(anonymous namespace)::Grow(…) const");
  EXPECT_EQ(ShortCppName("bool operator<(Foo const&, Foo const&)"), "bool operator<(…)");
  EXPECT_EQ(ShortCppName("Functor::operator()(int)"), "Functor::operator()(…)");
  EXPECT_EQ(ShortCppName("main"), "main");
}

// Kernel names as PyTorch 2.11, cuBLAS and NCCL launched them on the H200 (gpumem report --kernels
// --json of the bundled traces and the compatibility matrix's DDP run).
TEST(UserFramesTest, KernelNamesKeepWhatTheKernelComputes) {
  EXPECT_EQ(ShortKernelName("void at::native::vectorized_elementwise_kernel<4, "
                            "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
                            "at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
            "vectorized_elementwise_kernel<FillFunctor>");
  EXPECT_EQ(
      ShortKernelName("void at::native::unrolled_elementwise_kernel<at::native::AUnaryFunctor<"
                      "float, float, float, at::native::binary_internal::MulFunctor<float> >, "
                      "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, "
                      "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::"
                      "LoadWithoutCast, at::native::memory::StoreWithoutCast>(int, "
                      "at::native::AUnaryFunctor<float, float, float, at::native::"
                      "binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)"),
      "unrolled_elementwise_kernel<MulFunctor>");
  EXPECT_EQ(ShortKernelName("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, "
                            "at::native::func_wrapper_t<float, at::native::sum_functor<float, "
                            "float, float>::operator()(at::TensorIterator&)::{lambda(float, "
                            "float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, "
                            "at::native::func_wrapper_t<float, at::native::sum_functor<float, "
                            "float, float>::operator()(at::TensorIterator&)::{lambda(float, "
                            "float)#1}>, unsigned int, float, 4, 4>)"),
            "reduce_kernel<sum_functor>");
  // A lambda argument: the function it was written in.
  EXPECT_EQ(ShortKernelName("void at::native::vectorized_elementwise_kernel<4, at::native::"
                            "BinaryFunctor<float, float, float, at::native::(anonymous namespace)::"
                            "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::"
                            "{lambda(float, float)#1}>, std::array<char*, 3ul> >(int, ...)"),
            "vectorized_elementwise_kernel<threshold_kernel_impl>");
  EXPECT_EQ(ShortKernelName("void at::native::vectorized_elementwise_kernel<4, at::native::"
                            "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
                            "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()"
                            "#1}::operator()() const::{lambda()#7}::operator()() const::{lambda("
                            "float)#1}, std::array<char*, 2ul> >(int, ...)"),
            "vectorized_elementwise_kernel<launch_clamp_scalar>");
  EXPECT_EQ(ShortKernelName("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                            "at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::"
                            "(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
                            "std::plus<float>, float>(at::native::(anonymous namespace)::"
                            "TensorListMetadata<2>, ...)"),
            "multi_tensor_apply_kernel<BinaryOpListAlphaFunctor>");
  // Template arguments that are only its tuning (numbers and built-in types) go.
  EXPECT_EQ(ShortKernelName("void (anonymous namespace)::softmax_warp_forward<float, float, float, "
                            "4, true, false>(float*, float const*, int, int, int, bool const*, "
                            "int, bool)"),
            "softmax_warp_forward");
  EXPECT_EQ(ShortKernelName("void scal_kernel<float, float, 1, true, 6, 5, 5, 3>("
                            "cublasTransposeParams<float>, float const*, float*, float const*)"),
            "scal_kernel");
  EXPECT_EQ(ShortKernelName("void at::native::(anonymous namespace)::"
                            "nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
                            "float*, float const*, long const*, float const*, bool, long, long, "
                            "long, long)"),
            "nll_loss_forward_reduce_cuda_kernel_2d");
  // Short enough whole, with an argument that is no built-in: only the namespaces, return type
  // and parameters go.
  EXPECT_EQ(ShortKernelName("void at::native::foo_kernel<c10::BFloat16, MyTile<4> >(int)"),
            "foo_kernel<BFloat16, MyTile<4>>");
  EXPECT_EQ(ShortKernelName("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>("
                            "cutlass_80_simt_sgemm_64x64_8x5_nn_align1::Params)"),
            "cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>");
  // A generic base name keeps its namespace; a return type with brackets of its own goes too.
  EXPECT_EQ(ShortKernelName("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, "
                            "int, float, float, float, float, false, true, false, false, 6, false, "
                            "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
                            "cublasGemvTensorStridedBatched<float const>, "
                            "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParamsEx<"
                            "int, cublasGemvTensorStridedBatched<float const>, ...>)"),
            "gemvx::kernel<…>");
  EXPECT_EQ(ShortKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<"
                            "4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(ShortKernelName("increment(int*)"), "increment");
  // Not C++ signatures: as they are, or, spelling out their tiling, their first words and last.
  EXPECT_EQ(ShortKernelName("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_"
                            "warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
            "sm80_xmma_gemm_…_cublas");
  EXPECT_EQ(ShortKernelName("cutlass_80_simt_sgemm_64x64_8x5_nn_align1"),
            "cutlass_80_simt_sgemm_64x64_8x5_nn_align1");
  EXPECT_EQ(ShortKernelName("kernel_7f3a"), "kernel_7f3a");
  EXPECT_EQ(ShortKernelName(""), "");
}

// A trace's kernel names are the recorder's word, damage included: unbalanced brackets and stray
// separators shorten without reading past the name, and never lengthen it.
TEST(UserFramesTest, MalformedKernelNamesShortenSafely) {
  std::mt19937 random(7);
  constexpr std::string_view kAlphabet = "<>(): ,a_1Op{}#";
  for (int round = 0; round < 20000; ++round) {
    std::string name(random() % 90, ' ');
    for (char& c : name) c = kAlphabet[random() % kAlphabet.size()];
    const std::string shortened = ShortKernelName(name);
    EXPECT_LE(shortened.size(), name.size() + std::string_view("…").size()) << name;
  }
  EXPECT_EQ(ShortKernelName("void f<"), "f");
  EXPECT_EQ(ShortKernelName("(anonymous namespace)"), "(anonymous namespace)");
}

// The forward pass of a Linear: the user's train_step calls the module, whose addmm asks cuBLAS
// for its workspace.
std::vector<Frame> ForwardStack() {
  return {Native("/usr/lib/x86_64-linux-gnu/libcudart.so.12", "cudaMalloc"),
          Native("/usr/lib/x86_64-linux-gnu/libcublasLt.so.12"),
          Native("/usr/lib/x86_64-linux-gnu/libcublas.so.12", "cublasSgemm_v2"),
          Native(std::string(kTorchLib) + "libtorch_cuda.so",
                 "at::native::(anonymous namespace)::addmm_out_cuda_impl(at::Tensor&, at::Tensor "
                 "const&)"),
          Native(std::string(kTorchLib) + "libtorch_cpu.so",
                 "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, "
                 "c10::Scalar const&, c10::Scalar const&)"),
          Native(std::string(kTorchLib) + "libtorch_cpu.so",
                 "at::_ops::linear::call(at::Tensor const&, at::Tensor const&)"),
          Native("/usr/bin/python3.12", "_PyObject_MakeTpCall"),
          Python(std::string(kTorchPy) + "nn/modules/linear.py", 125, "Linear.forward"),
          Python(std::string(kTorchPy) + "nn/modules/module.py", 1790, "Module._call_impl"),
          Python("/home/u/train_mlp.py", 75, "make_training.<locals>.train_step"),
          Python("/home/u/train_mlp.py", 98, "main"),
          Native("/usr/bin/python3.12", "Py_RunMain"),
          Native("/usr/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_main")};
}

TEST(UserFramesTest, AForwardPassReadsAsTheUsersLineViaModuleOperatorAndHolder) {
  const std::vector<Frame> frames = ForwardStack();
  const MemoryHolder* holder = FindMemoryHolder(frames, false);
  ASSERT_NE(holder, nullptr);
  const SiteLabel label = LabelOf(frames, holder);
  ASSERT_TRUE(label.user_frame.has_value());
  EXPECT_EQ(label.user_frame->file, "/home/u/train_mlp.py");
  EXPECT_EQ(label.first_line, "train_mlp.py:75 in make_training.<locals>.train_step");
  EXPECT_EQ(label.via, "torch.nn.Linear.forward → aten::addmm → cuBLAS workspace");
}

// Under the cudaMallocAsync backend each tensor is its own allocation, which no holder keeps: the
// via line ends in the tensor, not in the allocator's library.
TEST(UserFramesTest, AStreamOrderedTensorReadsAsATensor) {
  const std::vector<Frame> forward = ForwardStack();
  std::vector<Frame> frames = {
      Native("/usr/lib/x86_64-linux-gnu/libcudart.so.12", "cudaMallocAsync"),
      Native(std::string(kTorchLib) + "libc10_cuda.so",
             "c10::cuda::CUDACachingAllocator::CudaMallocAsync::mallocAsync(void**, int, unsigned "
             "long, CUstream_st*)")};
  frames.insert(frames.end(), forward.begin() + 3, forward.end());  // from addmm_out_cuda_impl
  const SiteLabel label = LabelOf(frames, FindMemoryHolder(frames, /*stream_ordered=*/true));
  EXPECT_EQ(label.via, "torch.nn.Linear.forward → aten::addmm → PyTorch tensor");
}

TEST(UserFramesTest, ABackwardPassNamesTheAutogradNodeAndTheBackwardCall) {
  // An autograd thread's stack with the Python frames of loss.backward() appended outermost.
  const std::vector<Frame> frames = {
      Native("/usr/lib/x86_64-linux-gnu/libcudart.so.12", "cudaMalloc"),
      Native(std::string(kTorchLib) + "libc10_cuda.so",
             "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, "
             "unsigned long, CUstream_st*)"),
      Native(std::string(kTorchLib) + "libtorch_cpu.so",
             "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)"),
      Native(std::string(kTorchLib) + "libtorch_cpu.so",
             "torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, "
             "std::allocator<at::Tensor> >&&)"),
      Native(std::string(kTorchLib) + "libtorch_cpu.so",
             "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> "
             "const&)"),
      Python(std::string(kTorchPy) + "autograd/__init__.py", 353, "backward"),
      Python(std::string(kTorchPy) + "_tensor.py", 648, "Tensor.backward"),
      Python("/home/u/train_mlp.py", 80, "make_training.<locals>.train_step")};
  const SiteLabel label = LabelOf(frames, FindMemoryHolder(frames, false));
  EXPECT_EQ(label.first_line, "train_mlp.py:80 in make_training.<locals>.train_step");
  EXPECT_EQ(label.via,
            "torch.autograd.backward → AddmmBackward0 (gradient of a Linear) → aten::mm → "
            "PyTorch caching allocator segment");
  Frame unknown_node = frames[3];
  unknown_node.function = "torch::autograd::generated::FooBackward1::apply(int)";
  EXPECT_EQ(LabelOf({frames[0], unknown_node}, nullptr).via, "FooBackward1");
}

TEST(UserFramesTest, ANativeProgramsLineIsItsOwnSourceLineViaTheCudaCall) {
  const Frame hook = Native("/work/build/lib/libgpumem_preload.so", "cudaMalloc");
  const Frame user = Native("/work/build/bin/leak_loop", "leak_iteration()",
                            "/work/samples/leak_loop/leak_loop.cc", 26);
  const Frame caller =
      Native("/work/build/bin/leak_loop", "main", "/work/samples/leak_loop/leak_loop.cc", 32);
  const Frame libc = Native("/usr/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_main");
  const SiteLabel label = LabelOf({hook, user, caller, libc}, nullptr);
  EXPECT_EQ(label.first_line, "leak_loop.cc:26 in leak_iteration()");
  EXPECT_EQ(label.via, "cudaMalloc");
  EXPECT_EQ(LabelOf({user, caller, libc}, nullptr).via, "");
  // Without symbols: the module and offset, never in the via line.
  const SiteLabel bare = LabelOf(
      {Native("/work/build/tests/fake_cuda/libcudart.so.12"), Native("/work/build/bin/leak_loop")},
      nullptr);
  EXPECT_EQ(bare.first_line, "leak_loop+0x1234");
  EXPECT_EQ(bare.via, "");
}

TEST(UserFramesTest, WithoutAFrameOfTheUsersTheLibraryIsNamed) {
  const std::vector<Frame> frames = {Native("/usr/lib/x86_64-linux-gnu/libcudart.so.12"),
                                     Native("/opt/nccl/lib/libnccl.so.2"),
                                     Native("/usr/lib/x86_64-linux-gnu/libc.so.6")};
  const SiteLabel label = LabelOf(frames, FindMemoryHolder(frames, false));
  EXPECT_FALSE(label.user_frame.has_value());
  EXPECT_EQ(label.first_line, "(no frame of your code) allocated by NCCL (libnccl.so.2)");
  EXPECT_EQ(label.via, "");
  EXPECT_EQ(LabelOf({frames[0], Native("/usr/lib/libfoo.so.1")}, nullptr).first_line,
            "(no frame of your code) allocated by libfoo.so.1");
  Frame unknown;
  unknown.pc = 0x1111;
  EXPECT_EQ(LabelOf({unknown}, nullptr).first_line, "(no frame of your code) at 0x1111");
  EXPECT_EQ(LabelOf({}, nullptr).first_line, "(no stack recorded)");
}

TEST(UserFramesTest, LibraryPythonFramesAreNamedByPackageAndQualname) {
  EXPECT_EQ(
      DottedPythonName(Python(std::string(kTorchPy) + "nn/modules/linear.py", 1, "Linear.forward")),
      "torch.nn.Linear.forward");
  EXPECT_EQ(DottedPythonName(Python(std::string(kTorchPy) + "_tensor.py", 1, "Tensor.backward")),
            "torch.Tensor.backward");
  EXPECT_EQ(DottedPythonName(Python(std::string(kTorchPy) + "_dynamo/eval_frame.py", 1, "f")),
            "torch.f");
  EXPECT_EQ(DottedPythonName(Python("/venv/lib/python3.12/site-packages/six.py", 1, "g")), "six.g");
  EXPECT_EQ(DottedPythonName(Python("/usr/lib/python3.12/threading.py", 1, "Thread.run")),
            "threading.Thread.run");
  EXPECT_EQ(DottedPythonName(Python("<frozen runpy>", 1, "_run_code")), "_run_code");
}

TEST(UserFramesTest, NativeStacksGroupByTheUsersLine) {
  const Frame hook = Native("/work/build/lib/libgpumem_preload.so", "cudaMalloc");
  const Frame grow = Native("/opt/app/bin/app", "grow(unsigned long)", "/src/app.cc", 12);
  const Frame from_a = Native("/opt/app/bin/app", "a()", "/src/app.cc", 20);
  const Frame from_b = Native("/opt/app/bin/app", "b()", "/src/app.cc", 30);
  EXPECT_EQ(CallSiteKey({hook, grow, from_a}, GroupBy::kUser),
            CallSiteKey({hook, grow, from_b}, GroupBy::kUser));
  EXPECT_NE(CallSiteKey({hook, grow, from_a}, GroupBy::kStack),
            CallSiteKey({hook, grow, from_b}, GroupBy::kStack));
  EXPECT_NE(CallSiteKey({hook, grow, from_a}, GroupBy::kUser),
            CallSiteKey({hook, from_a}, GroupBy::kUser));
  EXPECT_EQ(CallSiteFrame({hook, grow, from_a}, GroupBy::kUser)->function, "grow(unsigned long)");
}

TEST(UserFramesTest, FullStacksDropTheInterpretersFramesWherePythonFramesStandForThem) {
  const std::vector<std::string> lines = FullStackLines(ForwardStack());
  for (const std::string& line : lines) EXPECT_EQ(line.find("python3.12"), std::string::npos);
  EXPECT_EQ(lines[4], "at::_ops::addmm::call(…) (libtorch_cpu.so+0x1234)");
  EXPECT_EQ(lines.back(), "__libc_start_main (libc.so.6+0x1234)");
  // Without Python frames the interpreter's frames are all there is: they stay.
  const std::vector<Frame> native = {Native("/usr/bin/python3.12", "main")};
  EXPECT_EQ(FullStackLines(native), std::vector<std::string>{"main (python3.12+0x1234)"});
}

TEST(UserFramesTest, ASiteIsItsSizeLineAndAtMostTwoMore) {
  Site site;
  site.tally.bytes = 64 << 20;
  site.tally.count = 3;
  site.frames = ForwardStack();
  site.holder = FindMemoryHolder(site.frames, false);
  site.label = LabelOf(site.frames, site.holder);
  std::string out;
  AppendSitesText({site}, 0, 0, StackStyle::kShort, &out);
  EXPECT_EQ(out,
            "  64.00 MiB  3 allocations  [held by cuBLAS]\n"
            "      train_mlp.py:75 in make_training.<locals>.train_step\n"
            "      via torch.nn.Linear.forward → aten::addmm → cuBLAS workspace\n");
}

}  // namespace
}  // namespace gpumem::report
