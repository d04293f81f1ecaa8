# P7 (round 188): stop 61's printed walk ahead P6 (exp62/k_p6.cuh) with the row's index loaded by
# the row before into Ahead, as C loads it, instead of at the row's start. Run in exp62/.
s = open('k_p6.cuh').read().replace('lossjit_kernel_p6(', 'lossjit_kernel_p7(')


def rep(a, b):
    global s
    assert s.count(a) == 1, a
    s = s.replace(a, b)


rep("""        lj::LogSumExpAcc<Value> a1;
        Value w[U][1][VW];
    };""", """        lj::LogSumExpAcc<Value> a1;
        Value w[U][1][VW];
        long long index1;  // P7: the row's index, loaded by the row before
    };""")
rep("""        for (int k = 0; k < kInputs; ++k) base[k] = lj::offset<R - 1>(c, in.strides[k]);
        const long long cache_columns = lj::row_cache_columns<Value, 1, Team::kPerBlock>();
        Value* const row_cache = Team::template team_cache<1>(lj::row_cache<Value>(), cache_columns);
        lj::LogSumExpAcc<Value> a1;""", """        for (int k = 0; k < kInputs; ++k) base[k] = lj::offset<R - 1>(c, in.strides[k]);
        ahead.index1 = lj::load_index(dtype(1), in.ptr[1], base[1]);
        const long long cache_columns = lj::row_cache_columns<Value, 1, Team::kPerBlock>();
        Value* const row_cache = Team::template team_cache<1>(lj::row_cache<Value>(), cache_columns);
        lj::LogSumExpAcc<Value> a1;""")
rep("""        const long long i_y = lj::load_index(dtype(1), in.ptr[1], base[1]);""",
    """        const long long i_y = ahead.index1;""")
rep("""            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            lj::prefetch_l2(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));""",
    """            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            ahead.index1 = lj::load_index(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));""")
open('k_p7.cuh', 'w').write(s)
open('tu_p7.cu', 'w').write(open('tu_p6.cu').read().replace('p6', 'p7'))
