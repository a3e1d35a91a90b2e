// A hostile CUDA candidate (tests only): its host code tries the attacks of issue 14 from inside the worker,
// then adds the vectors and throws with what it found, so anything it could read comes back in its log.
// @TOKEN_REVERSED@, @PORT@ and @MARKER@ are replaced by the test (the token is reversed so that it is
// spelled nowhere in the worker). a, b, out: [n] float32 (vector_add_f32).
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <cuda_runtime.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

static std::string slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  if (file) text << file.rdbuf();
  return text.str();
}

static bool connects(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return ok;
}

static void leave_an_orphan() {  // a setsid double fork: in no process group or session of the worker's
  if (fork() == 0) {
    setsid();
    if (fork() == 0) execl("/bin/sh", "sh", "-c", "sleep 300; true", "@MARKER@", static_cast<char*>(nullptr));
    _exit(0);
  }
}

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView out) {
  std::string token = "@TOKEN_REVERSED@";
  std::reverse(token.begin(), token.end());
  int processes = 0, holding = 0;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) {
      if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
      ++processes;
      std::string base = std::string("/proc/") + entry->d_name;
      for (const char* name : {"/cmdline", "/environ"})
        if (slurp(base + name).find(token) != std::string::npos) ++holding;
    }
    closedir(proc);
  }
  bool shadow = !slurp("/etc/shadow").empty();
  bool network = connects(@PORT@);
  leave_an_orphan();
  int64_t n = a.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(a.data_ptr()),
                                                  static_cast<const float*>(b.data_ptr()),
                                                  static_cast<float*>(out.data_ptr()), n);
  cudaStreamSynchronize(stream);
  TVM_FFI_THROW(RuntimeError) << "FINDINGS {\"uid\": " << getuid() << ", \"processes\": " << processes
                              << ", \"token_holders\": " << holding << ", \"shadow\": " << (shadow ? "true" : "false")
                              << ", \"network\": " << (network ? "true" : "false") << "}";
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
