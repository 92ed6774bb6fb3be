/*
 * After the load script's churn: how many 2 MiB pages StarryOS can hand a process
 * (private anonymous MAP_HUGETLB mappings, populated at once), taken until one fails, then
 * given back. Prints "load: huge pages N". Built static at test time for each architecture.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>

#define HUGE (2UL << 20)
#define MAX 1024

int main(void) {
    static void *maps[MAX];
    int n = 0;
    for (; n < MAX; n++) {
        void *p = mmap(0, HUGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED) break;
        ((volatile char *)p)[HUGE - 1] = 1;
        maps[n] = p;
    }
    printf("load: huge pages %d\n", n);
    for (int i = 0; i < n; i++) munmap(maps[i], HUGE);
    return 0;
}
