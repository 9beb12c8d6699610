//! `rootfence learn`: what it proposes comes from what the sandbox refused
//! the server, seen by rootfence itself: a server that needs files and
//! directories outside its roots starts after the rounds learn them, a
//! launcher gets its cache rather than its registry, a secret it opened
//! is named and never proposed, and refusals it only claims on stderr
//! propose nothing. The cases (`suites/learn.rs`) run as root and as the
//! unprivileged test user (`rootfence-test` when the tests run as root;
//! `tests/peers/install.sh` creates it), each with the server's own
//! namespaces and without.

use crate::common;

mod as_root {
    #[allow(unused_imports)]
    use super::*;

    mod with_namespaces {
        #[allow(unused_imports)]
        use super::*;

        fn tree() -> common::Tree {
            common::Tree::new()
        }

        include!("../suites/learn.rs");
    }

    mod without_namespaces {
        #[allow(unused_imports)]
        use super::*;

        fn tree() -> common::Tree {
            common::Tree::without_namespaces()
        }

        include!("../suites/learn.rs");
    }
}

mod as_the_test_user {
    #[allow(unused_imports)]
    use super::*;

    as_the_test_user!("../suites/learn.rs");
}
