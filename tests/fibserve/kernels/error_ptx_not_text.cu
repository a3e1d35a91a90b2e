// Build-log fixture: ptxas refuses the byte 0xff in an inline asm comment, and the #warning quotes a ptxas
// location, so the build read this file's PTX to point at the source: it was not UTF-8, and the UnicodeDecodeError
// made this compile error the analysis's failure (a task error, blamed on the service).
#warning ptxas error_ptx_not_text.ptx, line 3;
__global__ void add_one(float* x) {
  asm volatile("// \xff\n");
  x[threadIdx.x] += 1.0f;
}
