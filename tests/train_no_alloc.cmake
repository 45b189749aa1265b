# The allocator is wrapped at link time, so every call from libedgert.a is
# seen while a trainer steps (same technique as no_alloc.cmake).
if(TARGET test_train_no_alloc)
  target_link_options(test_train_no_alloc PRIVATE
    -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free
    -Wl,--wrap=aligned_alloc -Wl,--wrap=posix_memalign)
endif()
