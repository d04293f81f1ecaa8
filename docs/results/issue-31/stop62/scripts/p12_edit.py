# P12 (round 190): P10 (exp62/k_p10.cuh: the take's slot parity in Ahead, the index a row ahead) with
# the take picked out of the walk, as the hand-written C does: the lane whose tile holds the next
# row's column y stores x[y] into the next row's slot as it reads the next row in (the walk ahead,
# and the team's first row's first walk), so that nothing at a row's start waits on the index (round
# 188's ncu: P6 waits at each row's start for its index, 20k of 143k stall samples; C not at all).
# Run in exp62/.
s = open('k_p10.cuh').read().replace('lossjit_kernel_p10(', 'lossjit_kernel_p12(')


def rep(a, b, count=1):
    global s
    assert s.count(a) == count, (s.count(a), a)
    s = s.replace(a, b)


# One block's slots for the whole program (first_walk's and row's), at namespace scope.
rep("""// The program, one row at a time""", """static __shared__ float p12_takes_[1][2][1];  // (P12: one team a block)
// The program, one row at a time""")
# The first row's take, in its first walk (whole tiles, then the partial tile).
rep("""                #pragma unroll
                for (int u = 0; u < U; ++u) {
                    const long long j = j0 + (long long)u * Team::kTeam * VW;
                    #pragma unroll
                    for (int q = 0; q < VW; ++q) {
                        const long long col = j + q;
                        (void)col;
                        const Value x_x = v[u][0][q];
                        e1[u][q] = (Value)(x_x);
                    }
                    lj::add_tile_group(a1, e1[u], j);
                }""", """                const int tile_y0 = lj::offset_in_tile(ahead.index1, j0, (long long)U * Team::kTeam * VW);
                #pragma unroll
                for (int u = 0; u < U; ++u) {
                    const long long j = j0 + (long long)u * Team::kTeam * VW;
                    #pragma unroll
                    for (int q = 0; q < VW; ++q) {
                        const long long col = j + q;
                        (void)col;
                        const Value x_x = v[u][0][q];
                        if (tile_y0 == (int)(u * Team::kTeam * VW + q)) p12_takes_[Team::team_in_block()][0][0] = x_x;
                        e1[u][q] = (Value)(x_x);
                    }
                    lj::add_tile_group(a1, e1[u], j);
                }""")
rep("""                    Value e1[VW];
                    #pragma unroll
                    for (int q = 0; q < VW; ++q) {
                        const long long col = j + q;
                        (void)col;
                        const Value x_x = v[u][0][q];
                        e1[q] = (Value)(x_x);
                    }
                    lj::add_group(a1, e1, j, 0);""", """                    Value e1[VW];
                    #pragma unroll
                    for (int q = 0; q < VW; ++q) {
                        const long long col = j + q;
                        (void)col;
                        const Value x_x = v[u][0][q];
                        if (col == ahead.index1) p12_takes_[Team::team_in_block()][0][0] = x_x;
                        e1[q] = (Value)(x_x);
                    }
                    lj::add_group(a1, e1, j, 0);""")
# The row's start: no owner; the take read after the merges.
rep("""            __shared__ Value takes_[Team::kPerBlock][2][1];  // (takes_by_owner)
            const int take_parity_ = ahead.take_parity;  // this row's among the team's
            if (i_y >= 0 && i_y < C && Team::lane() == (int)(i_y / VW % Team::kTeam)) {
                const long long j = i_y, col = j;
                const long long jc = Team::template block_column<VW>(j);
                const Value x_x = jc < cache_columns ? *Team::cache_at(row_cache, 0, cache_columns, jc) : lj::load1<Value>(dtype(0), in.ptr[0], base[0] + j * in.strides[0][R - 1]);
                n3 = x_x;
                takes_[Team::team_in_block()][take_parity_][0] = n3;
            }
            a1 = Team::all_reduce(a1);
            Team::after_all_reduce();  // the owners' takes are seen
            if (i_y >= 0 && i_y < C) n3 = takes_[Team::team_in_block()][take_parity_][0];""", """            const int take_parity_ = ahead.take_parity;  // this row's among the team's
            a1 = Team::all_reduce(a1);
            Team::after_all_reduce();  // the takes are seen
            if (i_y >= 0 && i_y < C) n3 = p12_takes_[Team::team_in_block()][take_parity_][0];""")
# The next row's take, in the walk ahead (whole tiles, then the partial tile).
rep("""                    if (refill_) {  // the next row's first walk, and the next row into the cache
                        Value e1[U][VW];
                        #pragma unroll
                        for (int u = 0; u < U; ++u) {""", """                    if (refill_) {  // the next row's first walk, and the next row into the cache
                        Value e1[U][VW];
                        const int tile_n = lj::offset_in_tile(ahead.index1, j0, (long long)U * Team::kTeam * VW);
                        #pragma unroll
                        for (int u = 0; u < U; ++u) {""")
rep("""                                const Value x_x = ahead.w[u][0][q];
                                e1[u][q] = (Value)(x_x);""", """                                const Value x_x = ahead.w[u][0][q];
                                if (tile_n == (int)(u * Team::kTeam * VW + q)) p12_takes_[Team::team_in_block()][ahead.take_parity][0] = x_x;
                                e1[u][q] = (Value)(x_x);""")
rep("""                                const Value x_x = ahead.w[u][0][q];
                                e1[q] = (Value)(x_x);""", """                                const Value x_x = ahead.w[u][0][q];
                                if (col == ahead.index1) p12_takes_[Team::team_in_block()][ahead.take_parity][0] = x_x;
                                e1[q] = (Value)(x_x);""")
open('k_p12.cuh', 'w').write(s)
open('tu_p12.cu', 'w').write(open('tu_p6.cu').read().replace('p6', 'p12'))
