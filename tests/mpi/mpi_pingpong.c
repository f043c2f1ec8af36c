/* An MPI program as users write them: a ping-pong between ranks 0 and 1 at sizes 8 B to 256 KiB,
 * every byte of every message checked, then an allreduce over all ranks, every sum checked. Rank
 * 0 prints the 8 B half round trip and how many checks failed; it exits 0 only when none did.
 * The e2e tests run it under mpirun over Open MPI's pml ucx on vrdma0; bench/verbs_vs_rdmabench.py
 * times its 8 B ping-pong alone.
 *
 *   mpi_pingpong [ITERATIONS [LARGEST]]   1000 iterations a size up to 64 KiB (fewer above), sizes
 *                                         8 B and 8x up to LARGEST (256 KiB) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char pattern(int size, int iter, long i) { return (unsigned char)(size * 31 + iter * 7 + i * 13); }

static void fill(unsigned char* b, int size, int iter) {
  for (long i = 0; i < size; ++i) b[i] = pattern(size, iter, i);
}

static long check(const unsigned char* b, int size, int iter) {
  long bad = 0;
  for (long i = 0; i < size; ++i) bad += b[i] != pattern(size, iter, i);
  return bad;
}

/* Ranks 0 and 1 bounce `iters` messages of `size` bytes; the seconds it took. */
static double pingpong(int rank, unsigned char* buf, int size, int iters, long* bad) {
  int peer = 1 - rank;
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; ++it) {
    if (rank == 0) {
      fill(buf, size, it);
      MPI_Send(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      *bad += check(buf, size, it + 1000);
    } else {
      MPI_Recv(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      *bad += check(buf, size, it);
      fill(buf, size, it + 1000);
      MPI_Send(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
  }
  return MPI_Wtime() - t0;
}

static long allreduce_errors(int rank, int ranks) {
  enum { kCount = 4096 };
  static long in[kCount], out[kCount];
  for (long i = 0; i < kCount; ++i) in[i] = rank * 1000003L + i;
  MPI_Allreduce(in, out, kCount, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  long bad = 0;
  for (long i = 0; i < kCount; ++i) bad += out[i] != i * ranks + 1000003L * ranks * (ranks - 1) / 2;
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int iters = argc > 1 ? atoi(argv[1]) : 1000;
  int largest = argc > 2 ? atoi(argv[2]) : 1 << 18;
  unsigned char* buf = malloc(1 << 18);
  long bad = 0;
  double half_rtt_us = 0;
  if (ranks >= 2 && rank < 2) {
    pingpong(rank, buf, 8, iters / 10 + 1, &bad);  /* warm-up: connections made */
    for (int size = 8; size <= largest && size <= (1 << 18); size *= 8) {
      int n = size > 65536 ? iters / 20 + 1 : iters;
      double s = pingpong(rank, buf, size, n, &bad);
      if (size == 8) half_rtt_us = s / n / 2 * 1e6;
    }
  }
  bad += allreduce_errors(rank, ranks);
  long all_bad = 0;
  MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi_pingpong: %d ranks, 8 B half round trip %.2f us, %ld checks failed\n", ranks, half_rtt_us, all_bad);
  free(buf);
  MPI_Finalize();
  return all_bad ? 1 : 0;
}
