# The allocator is wrapped at link time, so every call from libedgert.a is seen.
if(TARGET test_no_alloc)
  target_link_options(test_no_alloc PRIVATE
    -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free
    -Wl,--wrap=aligned_alloc -Wl,--wrap=posix_memalign)
endif()
